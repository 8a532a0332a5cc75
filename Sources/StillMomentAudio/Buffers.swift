extension Array {
    /// Runs `body` with the array's storage, keeping `body`'s typed error (the standard
    /// `withUnsafeMutableBufferPointer` rethrows as `any Error`).
    @inline(__always)
    public mutating func withStorage<R>(
        _ body: (UnsafeMutableBufferPointer<Element>) throws(AudioError) -> R
    ) throws(AudioError) -> R {
        let result = withUnsafeMutableBufferPointer { buf in
            Result { () throws(AudioError) -> R in try body(buf) }
        }
        return try result.get()
    }
}
