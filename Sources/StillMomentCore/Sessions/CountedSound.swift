// A sound file opened once when a session is built, on the control side: its length at the
// engine's rate (for the plan) and as its decoder counted it, so that the voices made later
// on the render thread open it without counting again (an MP3 without a Xing tag is scanned
// to its end for its length: a long custom ambience once per segment, a gong per strike).
import StillMomentAudio

struct CountedSound: Sendable {
    let path: String
    /// Frames of one pass at the engine's rate.
    let frames: Int64
    /// Frames as the decoder counted them (nil: it could not).
    let fileFrames: Int64?

    /// `knownFrames`: its length as stored at the import (an imported sound), if known.
    init(path: String, engineRate: Int, loop: Bool = false, knownFrames: Int64? = nil) throws(AudioError) {
        let source = try DecodedSource(path: path, engineRate: engineRate, loop: loop, knownFrames: knownFrames)
        self.path = path
        frames = source.passLength
        fileFrames = source.decoder.totalFrames
    }

    /// A new source of the sound (for a voice), its length given.
    func source(engineRate: Int, loop: Bool = false) throws(AudioError) -> DecodedSource {
        try DecodedSource(path: path, engineRate: engineRate, loop: loop, knownFrames: fileFrames)
    }
}
