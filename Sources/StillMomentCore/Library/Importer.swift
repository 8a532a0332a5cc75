import FoundationEssentials
import Glibc
import GRDB
import StillMomentAudio

/// Copies audio files into the store, atomically, and catalogs them.
///
/// For each file: the content is probed (MP3 or M4A, as the engine decodes them) before
/// anything is copied; the copy goes to a locked temporary file in the store's folder,
/// hashed (XXH3-128) while copying and fsynced; a copy of a file already in the store is
/// dropped; the copy is decoded once for its exact length and loudness; then, in one
/// catalog transaction, the copy is renamed to `<UUID>.<ext>` (the folder fsynced) and the
/// row inserted. Any failure removes the temporary file; a process killed midway leaves
/// only a temporary or an unlisted file, which the next open of the store removes.
public struct Importer: Sendable {
    public let store: LibraryStore
    /// Refuse an import that would leave less than this free (and warn under `warnBelow`).
    public var reserveBytes: Int64 = 16 << 20
    public var warnBelow: Int64 = 500 << 20

    public init(store: LibraryStore) { self.store = store }

    public enum Outcome: Sendable, Equatable {
        case imported(Meditation)
        case alreadyThere(Meditation)
        /// The library had this content, but its stored copy was damaged or missing: the
        /// new copy replaced it.
        case replacedDamagedCopy(Meditation)
    }

    public struct Options: Sendable {
        public var teacher: String?
        public var name: String?
        /// The file's name as the user gave it, when `path` is another way to it (a file
        /// name that is not UTF-8 is opened through /proc/self/fd).
        public var sourceName: String?
        public init(teacher: String? = nil, name: String? = nil, sourceName: String? = nil) {
            self.teacher = teacher
            self.name = name
            self.sourceName = sourceName
        }
    }

    /// Imports one file. `progress` gets the fraction of the analysis done; `warn` gets
    /// warnings (low disk space).
    public func importFile(_ path: String, options: Options = Options(),
                           progress: (Double) -> Void = { _ in },
                           warn: (String) -> Void = { _ in }) throws(CoreError) -> Outcome {
        if let reason = store.readOnlyReason {
            throw CoreError.io(path: store.home, reason: both("cannot import into the library: \(reason)", "in die Bibliothek kann nichts importiert werden: \(reason)"))
        }
        let shownPath = options.sourceName ?? path
        let source: AudioFile
        let container: AudioContainer
        do {
            source = try AudioFile(path: path)
            container = try AudioContainer.detect(source)
            _ = try Self.openDecoder(source, container)   // probe: the engine must be able to play it
        } catch {
            throw CoreError.unplayable(path: "", reason: error.words.map { $0.replacingOccurrences(of: path, with: shownPath) })
        }
        let ext: String
        if case .mp4 = container { ext = "m4a" } else { ext = "mp3" }
        let free = store.freeBytes()
        if Int64(source.size) + reserveBytes > free {
            throw CoreError.noSpace(path: shownPath, home: store.home, needed: Int64(source.size), free: free)
        }
        if free - Int64(source.size) < warnBelow {
            let left = Self.megabytes(free - Int64(source.size))
            warn(tr("less than 500 MB left in \(store.home) (\(left) after this import)",
                    "weniger als 500 MB frei in \(store.home) (\(left) nach diesem Import)"))
        }

        let id = UUID().uuidString.lowercased()
        let stored = "\(id).\(ext)"
        let copy = try TempCopy(folder: store.meditationsFolder, name: ".import-\(id).\(ext)", from: source)
        let hash = copy.hash

        if let existing = try store.read({ db in try Self.row(withHash: hash, db) }) {
            if store.copyIsIntact(existing) {
                copy.discard()
                return .alreadyThere(existing)
            }
            try replaceCopy(of: existing, with: copy)
            return .replacedDamagedCopy(existing)
        }

        // Analyse the copy: what we keep is what we measure.
        let analysis: AudioAnalysis
        var index: SeekIndex?
        var tags: (title: String?, artist: String?, album: String?) = (nil, nil, nil)
        do {
            let file = try AudioFile(path: copy.path)
            let decoder = try Self.openDecoder(file, container)
            if let mp3 = decoder as? MP3Decoder { tags = mp3.tags() }
            if let aac = decoder as? AACDecoder { tags = (aac.tags.title, aac.tags.artist, aac.tags.album) }
            try decoder.seek(toFrame: 0)
            analysis = try AudioAnalysis.run(decoder, progress: progress)
            // read to its end: libmpg123's frame index covers it now
            index = (decoder as? MP3Decoder)?.seekIndex
        } catch {
            copy.discard()
            throw CoreError.unplayable(path: "", reason: Self.text(error).map { $0.replacingOccurrences(of: copy.path, with: shownPath) })
        }
        guard analysis.frames > 0 else {
            copy.discard()
            throw CoreError.unplayable(path: shownPath, reason: both("no decodable audio in the file", "kein abspielbarer Ton in der Datei"))
        }

        let shown = options.sourceName ?? path
        let original = Display.clean(String(shown.split(separator: "/").last ?? Substring(shown)))
        let meditation = Meditation(
            id: id, storedFile: stored, originalName: original, durationFrames: analysis.frames,
            sampleRate: analysis.sampleRate,
            teacher: Self.clean(options.teacher) ?? Self.clean(tags.artist) ?? "",
            name: Self.clean(options.name) ?? Self.clean(tags.title) ?? Self.nameFromFile(original),
            album: Self.clean(tags.album), dateAdded: Self.now(), trimStart: nil, trimEnd: nil,
            startGong: nil, endGong: nil, size: Int64(copy.size), contentHash: hash,
            loudnessGain: analysis.gain, lastPosition: nil)
        let seekIndex = index
        let finalPath = store.meditationsFolder + "/" + stored
        let folder = store.meditationsFolder
        let landedMeanwhile: Meditation?
        do {
            landedMeanwhile = try store.write { db in
                // A second import of the same content may have landed meanwhile.
                if let other = try Self.row(withHash: hash, db) { return other }
                try meditation.insert(db)
                try SyncMeditations.record(db, meditation)
                if let seekIndex { try LibraryStore.saveSeekIndex(seekIndex, for: id, db) }
                guard rename(copy.path, finalPath) == 0 else {
                    throw CoreError.io(path: finalPath, reason: .systemError)
                }
                Self.syncFolder(folder)
                return nil
            }
        } catch {
            copy.discard()
            unlink(finalPath)
            throw error      // the block throws CoreError only
        }
        if let landedMeanwhile {
            copy.discard()
            return .alreadyThere(landedMeanwhile)
        }
        copy.release()
        return .imported(meditation)
    }

    /// The row holding this content, if it can be read (a damaged one is for `verify`).
    static func row(withHash hash: String, _ db: Database) throws -> Meditation? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM meditation WHERE contentHash = ?", arguments: [hash]) else {
            return nil
        }
        guard let m = try? Meditation(row: row), m.damage == nil else {
            throw CoreError.damaged(both("the catalog entry for this content is damaged; run `stillmoment library verify --repair`, then import again",
                                       "der Katalogeintrag für diesen Inhalt ist beschädigt; führe `stillmoment library verify --repair` aus, dann importiere noch einmal"))
        }
        return m
    }

    /// Puts a good copy in place of a damaged or missing one: the same content, so the
    /// row stays as it is. Renamed over the old file in one step, under the catalog's
    /// write lock.
    func replaceCopy(of m: Meditation, with copy: TempCopy) throws(CoreError) {
        let finalPath = store.path(of: m)
        let folder = store.meditationsFolder
        let size = Int64(copy.size)
        do {
            try store.write { db in
                try db.execute(sql: "UPDATE meditation SET size = ? WHERE id = ?", arguments: [size, m.id])
                guard rename(copy.path, finalPath) == 0 else {
                    throw CoreError.io(path: finalPath, reason: .systemError)
                }
                Self.syncFolder(folder)
            }
        } catch {
            copy.discard()
            throw error
        }
        copy.release()
    }

    /// The copy-and-hash step alone (for the benchmark): copies `path` into `folder` as
    /// the import does and returns the hash; the copy is removed.
    public static func copyAndHash(_ path: String, into folder: String) throws(CoreError) -> String {
        let source: AudioFile
        do { source = try AudioFile(path: path) } catch { throw CoreError.unplayable(path: "", reason: error.words) }
        let copy = try TempCopy(folder: folder, name: ".import-bench-\(getpid())", from: source)
        defer { copy.discard() }
        return copy.hash
    }

    /// The analysis step alone (for the benchmark): decode and loudness.
    public static func analyse(_ path: String) throws(CoreError) -> AudioAnalysis {
        do {
            let file = try AudioFile(path: path)
            return try AudioAnalysis.run(try openDecoder(file, try AudioContainer.detect(file)))
        } catch {
            throw CoreError.unplayable(path: "", reason: Self.text(error))
        }
    }

    /// Imports a gong or an ambience as a custom sound with id `slug(name)`, copied into
    /// the store the same way; `timer --gong ID` / `--ambience ID` then finds it.
    public func importSound(_ path: String, kind: Sound.Kind, name: String, catalog: SoundCatalog) throws(CoreError) -> CustomSound {
        if let reason = store.readOnlyReason {
            throw CoreError.io(path: store.home, reason: both("cannot import into the library: \(reason)", "in die Bibliothek kann nichts importiert werden: \(reason)"))
        }
        let id = Self.slug(name)
        guard !id.isEmpty else { throw CoreError.badValue(option: "--name", reason: both("give the sound a name", "gib dem Klang einen Namen")) }
        if catalog.sounds.contains(where: { $0.id == id }) {
            throw CoreError.badValue(option: "--name", reason: both("a sound '\(id)' exists already; choose another name",
                                                                  "einen Klang '\(id)' gibt es schon; wähle einen anderen Namen"))
        }
        let source: AudioFile
        let container: AudioContainer
        var frames: Int64?
        do throws(AudioError) {
            source = try AudioFile(path: path)
            container = try AudioContainer.detect(source)
            let decoder = try Self.openDecoder(source, container)
            guard (decoder.totalFrames ?? 0) > 0 else { throw AudioError.noAudio(path: path) }
            // An MP3's length as a session counts it (exactly: joined streams decoded to the
            // end), kept so that it is not counted at each start; an M4A's sample table has it.
            if case .mpeg(let probe) = container {
                frames = try MP3Decoder(file: source, probe: probe).totalFrames
            }
        } catch {
            throw CoreError.unplayable(path: "", reason: error.words)
        }
        let ext: String
        if case .mp4 = container { ext = "m4a" } else { ext = "mp3" }
        if Int64(source.size) + reserveBytes > store.freeBytes() {
            throw CoreError.noSpace(path: path, home: store.home, needed: Int64(source.size), free: store.freeBytes())
        }
        let fileID = UUID().uuidString.lowercased()
        let copy = try TempCopy(folder: store.soundsFolder, name: ".import-\(fileID).\(ext)", from: source)
        let sound = CustomSound(id: id, storedFile: "\(fileID).\(ext)", kind: kind == .ambience ? "ambience" : "gong",
                                name: name.trimmingWhitespace(), size: Int64(copy.size), contentHash: copy.hash, dateAdded: Self.now())
        let finalPath = store.soundsFolder + "/" + sound.storedFile
        let length = frames
        let folder = store.soundsFolder
        do {
            try store.write { db in
                try sound.insert(db)
                // Its length as counted now: a session does not count it again at each start.
                if let length, LibraryStore.plausible(length, size: sound.size) {
                    try LibraryStore.saveSoundLength(length, of: sound, db)
                }
                try SyncSounds.record(db, sound, frames: length.flatMap { LibraryStore.plausible($0, size: sound.size) ? $0 : nil })
                guard rename(copy.path, finalPath) == 0 else {
                    throw CoreError.io(path: finalPath, reason: .systemError)
                }
                Self.syncFolder(folder)
            }
        } catch {
            copy.discard()
            unlink(finalPath)
            throw error
        }
        copy.release()
        return sound
    }

    /// "My Big Bell" → "my-big-bell"
    public static func slug(_ name: String) -> String {
        let lowered = name.trimmingWhitespace().lowercased()
        var out = ""
        for ch in lowered {
            if ch.isLetter || ch.isNumber { out.append(ch) } else if !out.hasSuffix("-") { out.append("-") }
        }
        while out.hasSuffix("-") { out.removeLast() }
        return out
    }

    /// A decoder for the import's probe and analysis: both decode (or need) no exact length
    /// up front; the analysis counts what decodes.
    static func openDecoder(_ file: AudioFile, _ container: AudioContainer) throws(AudioError) -> any AudioDecoder {
        switch container {
        case .mpeg(let probe): return try MP3Decoder(file: file, probe: probe, exactLength: false)
        case .mp4: return try AACDecoder(file: file)
        }
    }

    /// Now, to the millisecond the catalog keeps (so a returned row equals the stored one).
    static func now() -> Date {
        Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded() / 1000)
    }

    static func syncFolder(_ folder: String) {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
    }

    static func megabytes(_ bytes: Int64) -> String { "\(max(0, bytes) / 1_000_000) MB" }

    /// An error of the analysis (the audio layer's, or another) in the user's language.
    static func text(_ error: any Error) -> LocalizedText {
        (error as? AudioError)?.words ?? .same("\(error)")
    }

    static func clean(_ s: String?) -> String? {
        guard let s else { return nil }
        let t = s.trimmingWhitespace()
        return t.isEmpty ? nil : t
    }

    /// "03 - Body_Scan.mp3" → "Body Scan": no extension, no leading track number,
    /// separators to spaces.
    public static func nameFromFile(_ file: String) -> String {
        var base = Substring(file)
        if let dot = base.lastIndex(of: "."), dot != base.startIndex { base = base[..<dot] }
        var s = String(base)
        // A leading track number: digits followed by separators ("01 - ", "1. ", "02_").
        var chars = Substring(s)
        let digits = chars.prefix { $0.isNumber }
        if !digits.isEmpty && digits.count <= 3 {
            let rest = chars.dropFirst(digits.count)
            if let f = rest.first, " .-_)".contains(f) {
                chars = rest.drop { " .-_)".contains($0) }
                s = String(chars)
            }
        }
        s = String(s.map { "_-.".contains($0) ? " " : $0 })
        let words = s.split(whereSeparator: { $0.isWhitespace })
        let name = words.joined(separator: " ")
        return name.isEmpty ? String(base) : name
    }
}

/// A copy being made into the store: a temporary file, created exclusively, held with
/// flock until it is renamed and cataloged (or discarded), hashed while copying and
/// fsynced. A source that changes size while being copied is refused.
final class TempCopy: @unchecked Sendable {
    // @unchecked: used by one import on one thread.
    let path: String
    let fd: Int32
    private(set) var hash = ""
    private(set) var size: UInt64 = 0
    private var open_ = true

    init(folder: String, name: String, from source: AudioFile) throws(CoreError) {
        path = folder + "/" + name
        var fd: Int32 = -1
        // Another process's cleanup removes unlocked temporary files: between our create
        // and our lock it may take ours. Locked, we check the file is still there.
        for _ in 0..<5 {
            fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw CoreError.io(path: path, reason: .systemError) }
            _ = flock(fd, LOCK_EX)
            var st = stat()
            if fstat(fd, &st) == 0 && st.st_nlink > 0 { break }
            close(fd)
            fd = -1
        }
        guard fd >= 0 else {
            throw CoreError.io(path: path, reason: both("another stillmoment process keeps removing this temporary file; try the import again",
                                                      "ein anderer stillmoment-Prozess entfernt diese temporäre Datei immer wieder; versuche den Import noch einmal"))
        }
        self.fd = fd
        do {
            try copy(from: source)
        } catch {
            discard()
            throw error
        }
    }

    private func copy(from source: AudioFile) throws(CoreError) {
        let hasher = Hasher128()
        // Whole chunks go out with O_DIRECT where the file system allows it: the page
        // cache is bypassed, so the copy costs one memory copy (the read) plus the hash,
        // like `cp`'s in-kernel copy, and the final fsync has little left to do.
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 4096)
        defer { buffer.deallocate() }
        let flags = fcntl(fd, F_GETFL)
        var direct = fcntl(fd, F_SETFL, flags | FileIO.directFlag) == 0
        var offset: UInt64 = 0
        while true {
            let n: Int
            do {
                n = try source.read(at: offset, into: UnsafeMutableRawBufferPointer(start: buffer, count: chunk))
            } catch {
                throw CoreError.unplayable(path: "", reason: error.words)
            }
            if n == 0 { break }
            if direct && n % 4096 != 0 {
                // The tail is not a whole number of blocks: finish through the page cache.
                _ = fcntl(fd, F_SETFL, flags)
                direct = false
            }
            var written = 0
            while written < n {
                let w = Glibc.write(fd, buffer + written, n - written)
                if w < 0 {
                    if errno == EINTR { continue }
                    if errno == EINVAL && direct {
                        _ = fcntl(fd, F_SETFL, flags)
                        direct = false
                        continue
                    }
                    let reason = errno == EFBIG || errno == ENOSPC ? tr("the disk is full", "der Datenträger ist voll") : String(cString: strerror(errno))
                    throw CoreError.io(path: source.path, reason: both("cannot copy it into the store: \(reason)", "kann nicht in die Bibliothek kopiert werden: \(reason)"))
                }
                written += w
            }
            hasher.update(UnsafeRawBufferPointer(start: buffer, count: n))
            offset += UInt64(n)
        }
        var st = stat()
        if offset != source.size || fstat(source.fd, &st) != 0 || UInt64(st.st_size) != offset {
            throw CoreError.unplayable(path: source.path, reason: both("the file changed while it was being copied; try again when it is complete",
                                                                     "die Datei hat sich beim Kopieren verändert; versuche es noch einmal, wenn sie vollständig ist"))
        }
        guard fsync(fd) == 0 else {
            let reason = errno == ENOSPC || errno == EFBIG ? tr("the disk is full", "der Datenträger ist voll") : String(cString: strerror(errno))
            throw CoreError.io(path: source.path, reason: both("cannot copy it into the store: \(reason)", "kann nicht in die Bibliothek kopiert werden: \(reason)"))
        }
        size = offset
        hash = hasher.finish()
    }

    /// Removes the temporary file.
    func discard() {
        guard open_ else { return }
        unlink(path)
        close(fd)
        open_ = false
    }

    /// After the rename and the catalog row: drops the lock.
    func release() {
        guard open_ else { return }
        close(fd)
        open_ = false
    }

    deinit { discard() }
}
