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
                VariantSelector.Field(name: $0, value: HeaderFields.value(named: $0, in: fields))
            })
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
            let itemValues = names.map { HeaderFields.value(named: $0, in: itemFields) }
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
            name != "*" && HeaderFields.value(named: name, in: starter) == HeaderFields.value(named: name, in: fields)
        }
    }
}
