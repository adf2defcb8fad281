/// An entity tag (RFC 9110 section 8.8.3), read strictly: `"opaque"` or `W/"opaque"`, where the
/// opaque part is any visible byte but `"` (obs-text included). Anything else (no quotes, a
/// lowercase `w/`, a backslash) is no entity tag, and so matches nothing: a request's condition
/// that cannot be read never turns a full answer into a `304`.
struct EntityTag: Sendable, Equatable {
    let isWeak: Bool
    /// The tag between its quotes.
    let opaque: Substring

    /// The entity tag `text` is, spaces and tabs around it ignored; nil when it is none.
    init?(_ text: Substring) {
        var text = HeaderList.trimmed(text)
        isWeak = text.utf8.starts(with: "W/".utf8)
        if isWeak { text = text.dropFirst(2) }
        let utf8 = text.utf8
        guard utf8.count >= 2, utf8.first == UInt8(ascii: "\""), utf8.last == UInt8(ascii: "\"") else {
            return nil
        }
        let inner = text[utf8.index(after: utf8.startIndex)..<utf8.index(before: utf8.endIndex)]
        // etagc: %x21 / %x23-7E / obs-text.
        guard inner.utf8.allSatisfy({ $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) }) else { return nil }
        opaque = inner
    }

    /// Strong comparison (section 8.8.3.2): both strong, same opaque bytes. For `If-Match` and
    /// `If-Range`.
    func matchesStrongly(_ other: EntityTag) -> Bool {
        !isWeak && !other.isWeak && opaque.utf8.elementsEqual(other.opaque.utf8)
    }

    /// Weak comparison (section 8.8.3.2): same opaque bytes, either weak or strong. For
    /// `If-None-Match`.
    func matchesWeakly(_ other: EntityTag) -> Bool {
        opaque.utf8.elementsEqual(other.opaque.utf8)
    }

    /// The members of an `If-None-Match` or `If-Match` field: `*`, or a list of entity tags.
    enum Condition: Sendable, Equatable {
        /// `*`: any current representation.
        case any
        /// The tags listed; members that are no entity tag are left out.
        case tags([EntityTag])

        init(_ value: String) {
            let members = HeaderList.elements(value)
            if members.count == 1, members[0] == "*" {
                self = .any
            } else {
                self = .tags(members.compactMap { EntityTag($0) })
            }
        }

        /// Whether a representation whose tag is `tag` (nil without one) matches, by weak
        /// comparison, as `If-None-Match` compares.
        func matchesWeakly(_ tag: EntityTag?) -> Bool {
            switch self {
            case .any: return true
            case .tags(let tags):
                guard let tag else { return false }
                return tags.contains { $0.matchesWeakly(tag) }
            }
        }
    }
}
