import Foundation

/// Byte-level text helpers for header names and values, which HTTP defines in ASCII.
enum ASCII {
    /// `string` with its ASCII capitals lowercased, other characters left alone; `string` itself
    /// when it has none, which is the common case for header names and costs one scan.
    static func lowercased(_ string: String) -> String {
        let utf8 = string.utf8
        guard utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return string }
        return String(unsafeUninitializedCapacity: utf8.count) { buffer in
            var count = 0
            for byte in utf8 {
                buffer[count] = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
                count += 1
            }
            return count
        }
    }

    /// One bit for the length of `name` in bytes (bit 63 for 63 or more): a set of names ORs
    /// theirs, and most header fields are told apart from every name of a set by their length
    /// alone, which a native string knows without a scan.
    @inline(__always)
    static func lengthBit(_ name: String) -> UInt64 { lengthBit(ofLength: name.utf8.count) }

    /// The bit of a name `length` bytes long (``lengthBit(_:)``).
    @inline(__always)
    static func lengthBit(ofLength length: Int) -> UInt64 { 1 << UInt64(min(length, 63)) }

    /// Case-insensitive equality for header names without allocating lowercased copies.
    /// `lowercase` must already be lowercase ASCII.
    static func equalsIgnoringCase(_ lowercase: String, _ other: String) -> Bool {
        // Most names compared differ in length, which native strings know without a scan.
        guard lowercase.utf8.count == other.utf8.count else { return false }
        var left = lowercase.utf8.makeIterator()
        var right = other.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil):
                return true
            case let (a?, b?):
                let folded = (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b
                if a != folded { return false }
            default:
                return false
            }
        }
    }

    /// Whether `left` and `right` hold the same bytes: for names the transport spells itself,
    /// compared as bytes rather than as Unicode text (which a string longer than fifteen bytes
    /// pays for).
    static func equalBytes(_ left: String, _ right: String) -> Bool {
        let compared = left.utf8.withContiguousStorageIfAvailable { left in
            right.utf8.withContiguousStorageIfAvailable { right in
                left.count == right.count
                    && (left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
        return (compared ?? nil) ?? (left == right)
    }

    /// Whether `string` is one or more digits, the form of `delta-seconds` and `Age`.
    static func isDigits(_ string: some StringProtocol) -> Bool {
        !string.isEmpty && string.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }
}
