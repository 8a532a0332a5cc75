// A request from the wire as a typed call on the service, and its answer back as JSON.
// Every listener (the Unix socket today) goes through here: the arguments are read into
// the typed request of each command, strictly (an unknown key is refused, naming it).
import StillMomentCore
extension SessionService {
    /// `receivedAt`: when the request was read from its client (MonotonicClock ns), if known.
    func answer(_ command: ControlCommand, _ args: [String: JSON], receivedAt: UInt64? = nil) throws(ProtocolError) -> JSON {
        JSON(encoding: try call(command, args, receivedAt: receivedAt))
    }

    func call(_ command: ControlCommand, _ args: [String: JSON], receivedAt: UInt64? = nil) throws(ProtocolError) -> Status {
        switch command {
        case .status:
            try noArguments(command, args)
            reap()
            return status()
        case .pause:
            try noArguments(command, args)
            return try pause()
        case .resume:
            try noArguments(command, args)
            return try resume()
        case .stop:
            try noArguments(command, args)
            return try stop()
        case .finish:
            try noArguments(command, args)
            return try finish()
        case .seek:
            return try seek(SeekRequest(args: args), receivedAt: receivedAt)
        case .timer:
            return try startTimer(TimerStartRequest(args: args))
        case .play:
            return try play(PlayRequest(args: args))
        case .reschedule:
            try noArguments(command, args)
            return reschedule()
        case .ringNow:
            return try ringNow(RingNowRequest(args: args))
        case .subscribe:
            _ = try SubscribeRequest(args: args)    // the connection keeps the subscription itself
            reap()
            return status()
        case .unsubscribe:
            try noArguments(command, args)
            return status()
        }
    }
}
