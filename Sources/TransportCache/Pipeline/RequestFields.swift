/// What a call reads from a request's header fields, in one pass over them: the values of its key
/// headers, what it asks of the cache, and the account it names. Every call that keys a request
/// reads its fields here once; a hit walks them no second time.
struct RequestFields {
    /// The fields themselves: the store selects a variant by them (`Vary`).
    let all: [String: String]?
    /// The values of the key headers, as ``KeyHeaders/values(in:)`` gives them.
    let keyValues: [String?]
    /// What the request's own headers ask of the cache.
    let directives: RequestDirectives
    /// The account the request names (``AccountDirectory/header``), when asked for.
    let accountName: String?

    /// The fields `all` of a request keyed with `keyHeaders`; `readsAccount` to find the account
    /// it names, where each request names its own (``Accounts``).
    @inline(__always)
    init(_ all: [String: String]?, keyHeaders: borrowing KeyHeaders, readsAccount: Bool = false) {
        guard let all, !all.isEmpty else {
            self.init(empty: all)
            return
        }
        // A request whose one field names its account (where each names its own, as common as a
        // request without fields elsewhere) holds no key header or directive to look for: its
        // account is read without the whole reading's setup, and nothing else is.
        if readsAccount, all.count == 1 {
            for (field, value) in all where AccountDirectory.isHeader(field) {
                self.init(all: all, keyValues: [], directives: RequestDirectives(), accountName: value)
                return
            }
        }
        self.init(reading: all, keyHeaders: keyHeaders, readsAccount: readsAccount)
    }

    /// The fields of a request that has none (`all` is nil or empty).
    @inline(__always)
    init(empty all: [String: String]?) {
        self.init(all: all, keyValues: [], directives: RequestDirectives(), accountName: nil)
    }

    private init(all: [String: String]?, keyValues: [String?], directives: RequestDirectives, accountName: String?) {
        self.all = all
        self.keyValues = keyValues
        self.directives = directives
        self.accountName = accountName
    }

    @inline(never)
    private init(reading all: [String: String], keyHeaders: borrowing KeyHeaders, readsAccount: Bool) {
        var keyValues: [String?] = []
        var directives = RequestDirectives()
        var accountName: String?
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
        self.init(all: all, keyValues: keyValues, directives: directives, accountName: accountName)
    }
}
