/// The comma-separated lists of HTTP field values (RFC 9110 section 5.6.1): `Cache-Control`,
/// `Vary`, `Pragma`, `Connection`, `Age`. Every list the library reads is split here.
enum HeaderList {
    /// The elements of `value`, without surrounding spaces and tabs, empty elements left out, and
    /// commas inside a quoted string (`no-cache="a, b"`) kept inside their element.
    static func elements(_ value: String) -> [Substring] {
        var elements: [Substring] = []
        var start = value.startIndex
        var quoted = false
        var index = value.startIndex
        while index < value.endIndex {
            let character = value[index]
            if character == "\"" {
                quoted.toggle()
            } else if character == ",", !quoted {
                append(value[start..<index], to: &elements)
                start = value.index(after: index)
            }
            index = value.index(after: index)
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

    private static func append(_ element: Substring, to elements: inout [Substring]) {
        var trimmed = element
        while let first = trimmed.first, first == " " || first == "\t" { trimmed = trimmed.dropFirst() }
        while let last = trimmed.last, last == " " || last == "\t" { trimmed = trimmed.dropLast() }
        if !trimmed.isEmpty { elements.append(trimmed) }
    }
}
