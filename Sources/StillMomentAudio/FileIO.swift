import CFileIO

/// File-system calls the store needs whose C shapes Swift cannot reach.
public enum FileIO {
    /// O_DIRECT on this platform (its value differs between architectures).
    public static var directFlag: Int32 { sm_file_direct_flag() }

    /// Starts writeback of a written range without waiting (sync_file_range), so a long
    /// file's final fsync has only the tail to wait for. 0 or -errno.
    @discardableResult
    public static func startWriteback(_ fd: Int32, offset: Int64, length: Int64) -> Int32 {
        sm_file_start_writeback(fd, offset, length)
    }
}
