// What the commands that talk to the daemon ask, once their command line is read (by
// ArgumentParser or by QuickParse, which must agree): one value, run the same way.
import StillMomentControl
import StillMomentCore

enum Invocation: Equatable {
    /// `status [--json]`
    case status(json: Bool)
    /// `pause`, `resume`, `stop`, `finish`
    case request(Request)
    /// `seek TARGET` (+TIME, -TIME or a position; read when it runs)
    case seek(target: String)
    /// A timer or a meditation for the daemon (started if none runs); followed unless detached.
    case session(Request, detach: Bool, what: String)
    /// `daemon [--on-demand [--ready-fd N]]`
    case daemon(onDemand: Bool, readyFD: Int32?)

    func run() throws {
        switch self {
        case .status(let json): try StatusCommand.show(json: json)
        case .request(let request): Console.out(StatusText.summary(try control(request)))
        case .seek(let target): try SeekCommand.seek(target)
        case .session(let request, let detach, let what): try submit(request, detach: detach, what: what)
        case .daemon(let onDemand, let readyFD): try DaemonCommand.serve(onDemand: onDemand, readyFD: readyFD)
        }
    }
}
