/// The comma-separated lists of HTTP field values (RFC 9110 section 5.6.1): `Cache-Control`,
/// `Vary`, `Pragma`, `Connection`, `Age`. Every list the library reads is split here.
enum HeaderList {
    /// The elements of `value`, without surrounding spaces and tabs, empty elements left out, and
    /// commas inside a quoted string (`no-cache="a, b"`) kept inside their element.
    static func elements(_ value: String) -> [Substring] {
        // Over the UTF-8 view: the separators are ASCII, and walking Characters would cost a
        // grapheme break check per byte.
        var elements: [Substring] = []
        let utf8 = value.utf8
        var start = utf8.startIndex
        var quoted = false
        var index = utf8.startIndex
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "\"") {
                quoted.toggle()
            } else if byte == UInt8(ascii: ","), !quoted {
                append(value[start..<index], to: &elements)
                start = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        append(value[start...], to: &elements)
        return elements
    }

    /// ``elements(_:)`` with ASCII capitals lowercased: field names and directive names compare
    /// without case.
    static func lowercasedElements(_ value: String) -> [String] {
        elements(value).map { ASCII.lowercased(String($0)) }
    }

    /// Whether the list `value` has the element `lowercasedElement`, compared without case.
    static func contains(_ lowercasedElement: String, in value: String) -> Bool {
        elements(value).contains { ASCII.equalsIgnoringCase(lowercasedElement, String($0)) }
    }

    /// `text` without the spaces and tabs around it. Foundation's `trimmingCharacters(in:)` costs
    /// thousands of instructions a call on Linux, and header values are ASCII.
    static func trimmed(_ text: Substring) -> Substring {
        let utf8 = text.utf8
        var start = utf8.startIndex
        var end = utf8.endIndex
        while start < end, utf8[start] == 0x20 || utf8[start] == 0x09 { start = utf8.index(after: start) }
        while start < end {
            let last = utf8.index(before: end)
            guard utf8[last] == 0x20 || utf8[last] == 0x09 else { break }
            end = last
        }
        return text[start..<end]
    }

    private static func append(_ element: Substring, to elements: inout [Substring]) {
        let trimmed = trimmed(element)
        if !trimmed.isEmpty { elements.append(trimmed) }
    }
}
