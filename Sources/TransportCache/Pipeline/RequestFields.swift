/// What a call reads from a request's header fields, in one pass over them: the values of its key
/// headers, what it asks of the cache, and the account it names. Every call that keys a request
/// reads its fields here once; a hit walks them no second time.
///
/// The account's name is handed back beside the fields, not held in them: with three references,
/// the fields are released inline at the end of a hit, where a fourth had them released through
/// their type's value witness, 60 instructions a configured hit.
struct RequestFields {
    /// The fields themselves: the store selects a variant by them (`Vary`).
    let all: [String: String]?
    /// The values of the key headers, as ``KeyHeaders/values(in:)`` gives them.
    let keyValues: [String?]
    /// What the request's own headers ask of the cache.
    let directives: RequestDirectives

    /// The fields `all` of a request keyed with `keyHeaders`.
    @inline(__always)
    init(_ all: [String: String]?, keyHeaders: borrowing KeyHeaders) {
        var accountName: String?
        self.init(all, keyHeaders: keyHeaders, readsAccount: false, accountName: &accountName)
    }

    /// The fields `all` of a request keyed with `keyHeaders`; `readsAccount` to find the account
    /// it names (``AccountDirectory/header``) where each request names its own (``Accounts``),
    /// set in `accountName`.
    @inline(__always)
    init(_ all: [String: String]?, keyHeaders: borrowing KeyHeaders, readsAccount: Bool, accountName: inout String?) {
        guard let all, !all.isEmpty else {
            self.init(empty: all)
            return
        }
        // A request whose one field names its account (where each names its own, as common as a
        // request without fields elsewhere) holds no key header or directive to look for: its
        // account is read without the whole reading's setup, and nothing else is.
        if readsAccount, all.count == 1 {
            for (field, value) in all where AccountDirectory.isHeader(field) {
                accountName = value
                self.init(all: all, keyValues: [], directives: RequestDirectives())
                return
            }
        }
        self.init(reading: all, keyHeaders: keyHeaders, readsAccount: readsAccount, accountName: &accountName)
    }

    /// The fields of a request that has none (`all` is nil or empty).
    @inline(__always)
    init(empty all: [String: String]?) {
        self.init(all: all, keyValues: [], directives: RequestDirectives())
    }

    private init(all: [String: String]?, keyValues: [String?], directives: RequestDirectives) {
        self.all = all
        self.keyValues = keyValues
        self.directives = directives
    }

    @inline(never)
    private init(
        reading all: [String: String], keyHeaders: borrowing KeyHeaders, readsAccount: Bool, accountName: inout String?
    ) {
        var keyValues: [String?] = []
        var directives = RequestDirectives()
        // A field of no length looked for (most of them) costs one test.
        let sought = keyHeaders.lengths | RequestDirectives.lengths | (readsAccount ? AccountDirectory.lengthBit : 0)
        for (field, value) in all where sought & ASCII.lengthBit(field) != 0 {
            // The transport's own field: the request is keyed by the account it names, and it
            // is no key header or directive (it is taken off before the request goes out).
            if readsAccount, AccountDirectory.isHeader(field) {
                accountName = value
                continue
            }
            keyHeaders.read(field, value, into: &keyValues)
            directives.read(field, value)
        }
        directives.finish()
        self.init(all: all, keyValues: keyValues, directives: directives)
    }
}
