// A typed request as a call on the service, and its answer back as JSON. Every listener
// (the Unix socket today) reads the wire into a `Request` first (strictly: Requests.swift)
// and comes here with it.
import StillMomentCore

extension SessionService {
    /// `receivedAt`: when the request was read from its client (MonotonicClock ns), if known.
    func call(_ request: Request, receivedAt: UInt64? = nil) throws(ProtocolError) -> Status {
        switch request {
        case .status, .subscribe:      // a subscription is the connection's; its answer the status
            reap()
            return status()
        case .unsubscribe: return status()
        case .pause: return try pause()
        case .resume: return try resume()
        case .stop: return try stop()
        case .finish: return try finish()
        case .seek(let seek): return try self.seek(seek, receivedAt: receivedAt)
        case .timer(let timer): return try startTimer(timer)
        case .play(let play): return try self.play(play)
        case .reschedule: return reschedule()
        case .ringNow(let id): return try ringNow(id)
        case .ring(let ring): return try self.ring(ring)
        case .rooms: return roomsStatus()
        }
    }
}
