/// A request's `Range` (RFC 9110 section 14.2) as a cache answering from a complete stored
/// representation reads it: one byte range, or a reason to send the whole representation.
///
/// Only a single range in the `bytes` unit is served as a part. Several ranges (a multipart answer),
/// another unit, or a field that is not a valid ranges-specifier are ignored, which the RFC allows
/// of any recipient: the whole representation answers, as if no `Range` had been sent.
enum ByteRange: Sendable, Equatable {
    /// `first-last` or `first-`: from `first` to `last` inclusive (nil: to the end).
    case from(first: Int, last: Int?)
    /// `-length`: the last `length` bytes.
    case suffix(length: Int)

    /// The single byte range `value` asks for; nil when the field is to be ignored.
    init?(_ value: String) {
        let text = HeaderList.trimmed(value[...])
        guard let equals = text.firstIndex(of: "="),
            ASCII.equalsIgnoringCase("bytes", String(HeaderList.trimmed(text[..<equals])))
        else { return nil }
        let ranges = HeaderList.elements(String(text[text.index(after: equals)...]))
        guard ranges.count == 1, let dash = ranges[0].firstIndex(of: "-") else { return nil }
        let first = ranges[0][..<dash]
        let last = ranges[0][ranges[0].index(after: dash)...]
        if first.isEmpty {
            guard let length = Self.position(last) else { return nil }
            self = .suffix(length: length)
            return
        }
        guard let first = Self.position(first) else { return nil }
        if last.isEmpty {
            self = .from(first: first, last: nil)
            return
        }
        // A last position before the first makes the field invalid (section 14.1.1).
        guard let last = Self.position(last), last >= first else { return nil }
        self = .from(first: first, last: last)
    }

    /// The byte offsets this range selects from a representation of `length` bytes, clamped to
    /// it; nil when it selects none (unsatisfiable: answered `416`).
    func offsets(in length: Int) -> Range<Int>? {
        switch self {
        case .from(let first, let last):
            guard first < length else { return nil }
            return first..<(min(last ?? Int.max - 1, length - 1) + 1)
        case .suffix(let suffix):
            guard suffix > 0, length > 0 else { return nil }
            return max(0, length - suffix)..<length
        }
    }

    /// A non-negative decimal position; an overflowing one reads as the largest (it then lies past
    /// the end of any stored body).
    private static func position(_ text: Substring) -> Int? {
        guard ASCII.isDigits(text) else { return nil }
        return Int(text) ?? Int.max - 1
    }
}
