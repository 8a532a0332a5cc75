// The benchmark driver: the engine's side of each measure in `make bench`
// (bench/run.sh times it against the reference tools in the same run).
import Glibc
import StillMomentAudio
import StillMomentCore

func fail(_ message: String) -> Never {
    var line = "stillmoment-bench: \(message)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(1)
}

let args = CommandLine.arguments
guard args.count >= 2 else {
    fail("usage: stillmoment-bench render INPUT OUTPUT.wav [float|s16]")
}

switch args[1] {
case "render":
    // Decode INPUT and render it through the mixer to a WAV file, as fast as the CPU goes.
    guard args.count >= 4 else { fail("usage: stillmoment-bench render INPUT OUTPUT.wav [float|s16]") }
    let format: WAVWriter.SampleFormat = args.count > 4 && args[4] == "s16" ? .int16 : .float32
    do {
        let decoder = try openDecoder(path: args[2])
        let rate = decoder.format.sampleRate
        let source = try DecodedSource(decoder: decoder, engineRate: rate)
        guard let length = source.length else { fail("\(args[2]): length unknown") }
        let engine = try AudioEngine(sampleRate: rate, sink: .file(path: args[3], format: format), blockFrames: 4096)
        engine.add(Voice(id: 1, source: source, start: 0))
        try engine.start(end: length)
        let state = engine.waitUntilDone()
        engine.stop()
        if state != .finished { fail("render ended \(state): \(engine.errors.map(\.description).joined(separator: "; "))") }
    } catch {
        fail(error.description)
    }
case "copy":
    // The import's copy into the store, hashed while copying and fsynced.
    guard args.count >= 4 else { fail("usage: stillmoment-bench copy FILE FOLDER") }
    do { print(try Importer.copyAndHash(args[2], into: args[3])) } catch { fail(error.description) }
case "analyse":
    // The import's single decode: exact length and EBU R128 loudness with true peak.
    guard args.count >= 3 else { fail("usage: stillmoment-bench analyse FILE") }
    do {
        let a = try Importer.analyse(args[2])
        print("\(a.frames) frames, \(a.loudness.map { "\($0) LUFS" } ?? "silent"), peak \(a.truePeak) dBTP, gain \(a.gain) dB")
    } catch {
        fail(error.description)
    }
case "play":
    // Plays FILE on DEVICE in real time for SECONDS (0: the whole file) and reports the
    // output thread's counts and the audio clock against CLOCK_MONOTONIC.
    guard args.count >= 4 else { fail("usage: stillmoment-bench play FILE DEVICE [SECONDS] [loop]") }
    do {
        // BUFFER_MS and PERIODS (environment) try other device buffers than the default.
        func number(_ name: String) -> Int? { getenv(name).flatMap { Int(String(cString: $0)) } }
        let name: DeviceName
        do { name = try DeviceName(parsing: args[3]) } catch { fail(error.description) }
        let device = DeviceConfiguration(name: name, bufferMicroseconds: number("BUFFER_MS").map { $0 * 1000 },
                                         periods: number("PERIODS"))
        let engine = try AudioEngine(sampleRate: 44100, sink: .device(device))
        if let info = engine.deviceInfo {
            print("device: \(info.name), \(info.rate) Hz \(info.sampleFormat), buffer \(info.bufferFrames) frames "
                  + "in periods of \(info.periodFrames), ring \(info.ringFrames)")
        }
        let loop = args.count > 5 && args[5] == "loop"
        let source = try DecodedSource(path: args[2], engineRate: engine.sampleRate, loop: loop)
        let seconds = args.count > 4 ? Double(args[4]) ?? 0 : 0
        let end = seconds > 0 ? Int64(seconds * Double(engine.sampleRate)) : (source.length ?? 0)
        engine.add(Voice(id: 1, source: source, start: 0))
        try engine.start(end: end)
        // The clock: wait until sound is heard, then compare position and wall time.
        // Measured from 5 s in: the sound server settles its latency first.
        var t0 = timespec(), t1 = timespec()
        let settle = Int64(5 * engine.sampleRate)
        while engine.position < settle && (engine.state == .running || engine.state == .idle) { usleep(50_000) }
        clock_gettime(CLOCK_MONOTONIC, &t0)
        let p0 = engine.position
        var p1 = p0
        while engine.state == .running || engine.state == .idle {
            usleep(200_000)
            let p = engine.position
            // Only while it moves: it stands still while the device drains at the end.
            if p < end && p > p1 { p1 = p; clock_gettime(CLOCK_MONOTONIC, &t1) }
        }
        let wall = Double(t1.tv_sec - t0.tv_sec) + Double(t1.tv_nsec - t0.tv_nsec) / 1e9
        let audio = Double(p1 - p0) / Double(engine.sampleRate)
        let stats = engine.statistics
        print("clock: audio \(audio) s, wall \(wall) s, drift \((audio - wall) * 1000) ms")
        print("xruns: \(stats?.xruns ?? -1), silence events: \(stats?.silenceEvents ?? -1), realtime: \(stats?.realtime.map { $0 ? "SCHED_FIFO" : "normal priority (\(stats?.realtimeRefusal ?? "?"))" } ?? "?")")
        engine.stop()
    } catch {
        fail(error.description)
    }
default:
    fail("unknown command \(args[1])")
}
