import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `Vary` (RFC 9110 section 12.5.5, RFC 9111 section 4.1): which request fields select the
/// representation a response is, and so which later requests it may answer.
enum Vary {
    /// The lowercased field names `response` varies on; `*` among them when it varies on
    /// something no request field shows. Empty when it does not vary.
    static func names(of response: URLResponse) -> [String] {
        guard let value = (response as? HTTPURLResponse)?.headerValue("vary") else { return [] }
        return HeaderList.lowercasedElements(value)
    }

    /// The variant selector of a response varying on `names`, fetched by a request with `fields`.
    /// Fields that are part of the key already are left out: the key has matched them.
    static func selector(names: [String], requestFields fields: [String: String]?, keyHeaders: KeyHeaders)
        -> VariantSelector
    {
        VariantSelector(
            fields: names.filter { !keyHeaders.names.contains($0) }.map {
                VariantSelector.Field(name: $0, value: value(of: $0, in: fields))
            })
    }

    private static let credentialFields: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The value of the request field `lowercasedName` in `fields`, normalised (see
    /// ``normalized(_:lowercasedName:)``).
    static func value(of lowercasedName: String, in fields: [String: String]?) -> String? {
        HeaderFields.value(named: lowercasedName, in: fields).map { normalized($0, lowercasedName: lowercasedName) }
    }

    /// `value` of the request field `lowercasedName` in a form two requests that select the same
    /// representation share (RFC 9111 section 4.1): without the spaces and tabs around it and
    /// around the commas between list members (quoted strings kept whole); for `Accept-Language`,
    /// whose language ranges compare without case and whose order carries no meaning beside
    /// their weights, also lowercased and in sorted order.
    ///
    /// Credentials (`Authorization`, `Proxy-Authorization`, `Cookie`) are never normalised: two
    /// requests whose credentials differ in any byte never share an answer.
    /// - Complexity: one scan, and no allocation, for a value already in that form without commas.
    static func normalized(_ value: String, lowercasedName: String) -> String {
        let isLanguage = lowercasedName == "accept-language"
        let needsWork = value.utf8.contains { byte in
            byte == 0x20 || byte == 0x09 || byte == UInt8(ascii: ",") || (isLanguage && byte >= 0x41 && byte <= 0x5A)
        }
        // A value already in its form is its own, a credential's included: no set is looked up.
        guard needsWork, !credentialFields.contains(lowercasedName) else { return value }
        var members = HeaderList.elements(value).map(String.init)
        if isLanguage {
            members = members.map { member in
                ASCII.lowercased(
                    member.split(separator: ";").map { String(HeaderList.trimmed($0)) }.joined(separator: ";"))
            }
            .sorted()
        }
        return members.joined(separator: ", ")
    }

    /// `items` in groups whose requests an answer varying on `names` could answer alike: one group
    /// per combination of their values, in the order each combination first appears; every item
    /// alone for `*`.
    static func groups<Item>(_ items: [Item], varyingOn names: [String], fields: (Item) -> [String: String]?)
        -> [[Item]]
    {
        guard !names.contains("*") else { return items.map { [$0] } }
        var groups: [[Item]] = []
        var values: [[String?]] = []
        for item in items {
            let itemFields = fields(item)
            let itemValues = names.map { value(of: $0, in: itemFields) }
            if let position = values.firstIndex(of: itemValues) {
                groups[position].append(item)
            } else {
                values.append(itemValues)
                groups.append([item])
            }
        }
        return groups
    }

    /// Whether an answer varying on `names`, fetched by a request with `fetchedWith` fields, may
    /// answer a request with `fields`: never for `*`, otherwise when both carry the same values.
    static func answer(
        varyingOn names: [String], fetchedWith starter: [String: String]?, matches fields: [String: String]?
    ) -> Bool {
        names.allSatisfy { name in
            name != "*" && value(of: name, in: starter) == value(of: name, in: fields)
        }
    }
}
