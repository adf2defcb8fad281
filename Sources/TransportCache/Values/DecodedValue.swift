import Foundation

/// Which decoded value of an entry: the type and the decoder's settings (see
/// ``DecoderSettings``).
struct DecodedValueKey: Hashable, Sendable {
    let type: ObjectIdentifier
    let settings: DecoderSettings

    init<Value>(_ type: Value.Type, decoder: any ResponseDecoding) {
        self.type = ObjectIdentifier(type)
        settings = DecoderSettings(of: decoder)
    }
}

/// A decoded value held by an entry.
///
/// The typed subclass is reached with one unchecked downcast, since the key already names the
/// type. When the key names the decoder instance, the value keeps that decoder alive, so that
/// its identity cannot be taken by a new decoder with other settings while the value lives. A
/// value keyed by settings holds no decoder: a fresh decoder per call is released with its call.
///
/// `@unchecked Sendable` is safe here: every stored property is an immutable `let` of a Sendable type; the class
/// is not final only so that ``DecodedValue`` can carry the value.
class AnyDecodedValue: @unchecked Sendable {
    /// The bytes the value was decoded from.
    let data: Data
    let retainedDecoder: (any ResponseDecoding)?

    init(data: Data, retaining decoder: (any ResponseDecoding)?) {
        self.data = data
        retainedDecoder = decoder
    }

    /// The name of the value's type, for ``CachedTransport/snapshot()``.
    var typeName: String { "" }

    /// What a decoded value is charged against the byte budget beyond its body: the box, the
    /// table slot and the decoder reference.
    static let overhead = 64

    /// What a value decoded from `data` is charged against the byte budget: its body's bytes plus
    /// ``overhead``.
    static func charge(forDecoding data: Data) -> Int {
        data.count + overhead
    }
}

/// `@unchecked Sendable` is safe here for the same reason as ``AnyDecodedValue``: `value` is an immutable `let`
/// of a Sendable type.
final class DecodedValue<Value: Sendable>: AnyDecodedValue, @unchecked Sendable {
    let value: Value

    init(_ value: Value, data: Data, retaining decoder: (any ResponseDecoding)?) {
        self.value = value
        super.init(data: data, retaining: decoder)
    }

    override var typeName: String { String(describing: Value.self) }
}

/// What an entry holds for one ``DecodedValueKey``.
enum DecodedSlot {
    /// One caller is decoding; the others wait here.
    case decoding(waiters: [CheckedContinuation<DecodeOutcome, Never>])
    /// Decoded, and charged `cost` bytes against the budget.
    case decoded(AnyDecodedValue, cost: Int)

    var isDecoded: Bool {
        if case .decoded = self { return true }
        return false
    }

    var cost: Int {
        if case .decoded(_, let cost) = self { return cost }
        return 0
    }
}

/// The decoded values of one stored entry and the decodes under way for it, most recently used
/// first.
///
/// A short array rather than a dictionary: an entry keeps at most
/// ``CachedTransport/Configuration/Storage/maximumDecodedValuesPerEntry`` values (a handful), so comparing
/// a few keys costs less than hashing one, and the order of the array is the recency order.
/// Guarded by the store's lock, like the entry's other mutable state.
struct DecodedValues {
    private struct Item {
        let key: DecodedValueKey
        var slot: DecodedSlot
    }

    private var items: [Item] = []

    private func position(of key: DecodedValueKey) -> Int? {
        items.firstIndex { $0.key == key }
    }

    /// The slot for `key`, read without changing its recency. Setting a new slot puts it first;
    /// setting nil removes it.
    subscript(key: DecodedValueKey) -> DecodedSlot? {
        get { position(of: key).map { items[$0].slot } }
        set {
            switch (position(of: key), newValue) {
            case let (position?, slot?): items[position].slot = slot
            case let (position?, nil): items.remove(at: position)
            case let (nil, slot?): items.insert(Item(key: key, slot: slot), at: 0)
            case (nil, nil): break
            }
        }
    }

    /// The value kept for `key`, marked as the most recently used.
    /// - Complexity: O(n) in the handful of slots; no allocation.
    mutating func use(_ key: DecodedValueKey) -> AnyDecodedValue? {
        guard let position = position(of: key), case .decoded(let value, _) = items[position].slot else { return nil }
        if position > 0 { items.insert(items.remove(at: position), at: 0) }
        return value
    }

    /// Keeps `value` for `key` as the most recently used, then drops the least recently used
    /// kept values beyond `limit` (decodes under way are not counted and never dropped).
    /// - Returns: how many values were dropped and the bytes they were charged.
    mutating func keep(_ value: AnyDecodedValue, cost: Int, for key: DecodedValueKey, limit: Int) -> (
        dropped: Int, cost: Int
    ) {
        self[key] = nil
        items.insert(Item(key: key, slot: .decoded(value, cost: cost)), at: 0)
        var kept = 0
        var dropped = (dropped: 0, cost: 0)
        items.removeAll { item in
            guard item.slot.isDecoded else { return false }
            kept += 1
            guard kept > limit else { return false }
            dropped.dropped += 1
            dropped.cost += item.slot.cost
            return true
        }
        return dropped
    }

    /// Only the kept values, in the same order: decodes under way belong to the entry that
    /// started them.
    var keptValues: DecodedValues {
        var kept = self
        kept.items.removeAll { !$0.slot.isDecoded }
        return kept
    }

    /// The bytes the kept values are charged.
    var cost: Int { items.reduce(0) { $0 + $1.slot.cost } }

    /// The names of the types decoded and kept, most recently used first.
    var typeNames: [String] {
        items.compactMap { item in
            guard case .decoded(let value, _) = item.slot else { return nil }
            return value.typeName
        }
    }

    /// How many values are kept.
    var count: Int { items.reduce(0) { $0 + ($1.slot.isDecoded ? 1 : 0) } }

    /// Drops every kept value; decodes under way go on and their callers get their values.
    /// - Returns: how many values were dropped and the bytes they were charged.
    mutating func removeKeptValues() -> (dropped: Int, cost: Int) {
        let dropped = (dropped: count, cost: cost)
        if dropped.dropped > 0 { items.removeAll { $0.slot.isDecoded } }
        return dropped
    }

    /// Callers waiting for a decode under way.
    var waitingCallers: Int {
        items.reduce(0) { total, item in
            if case .decoding(let waiters) = item.slot { return total + waiters.count }
            return total
        }
    }
}

/// What a caller waiting for another caller's decode gets.
enum DecodeOutcome: Sendable {
    case decoded(AnyDecodedValue)
    case failed(any Error)
    /// Nothing to wait for any more: claim the decode again.
    case retry
}

extension ResponseStore {
    enum DecodeClaim {
        case decoded(AnyDecodedValue)
        /// The caller decodes, then calls ``finishDecode(_:on:for:with:limit:)``.
        case claimed
        /// Another caller is decoding.
        case busy
    }

    /// Claims the decode of `valueKey` for `entry`, unless it is done or under way.
    func claimDecode(_ valueKey: DecodedValueKey, on entry: StoredResponse) -> DecodeClaim {
        state.withLock { state in
            if let value = entry.decoded.use(valueKey) {
                state.statistics.decodedHits += 1
                return .decoded(value)
            }
            if entry.decoded[valueKey] != nil { return .busy }
            entry.decoded[valueKey] = .decoding(waiters: [])
            return .claimed
        }
    }

    /// Adds `waiter` to the decode of `valueKey` under way for `entry`.
    /// - Returns: nil when added (the decoding caller resumes it); otherwise what to resume it
    ///   with at once: the value when the decode finished in between, or ``DecodeOutcome/retry``
    ///   when it failed in between and was not kept. Beside it, the tests watching for callers
    ///   waiting on decodes that this one let through, to resume once the lock is released.
    func waitForDecode(
        _ valueKey: DecodedValueKey,
        on entry: StoredResponse,
        waiter: CheckedContinuation<DecodeOutcome, Never>
    ) -> (immediate: DecodeOutcome?, watchers: WatchedCount.Watchers) {
        state.withLock { state in
            switch entry.decoded[valueKey] {
            case .decoding(var waiters)?:
                waiters.append(waiter)
                entry.decoded[valueKey] = .decoding(waiters: waiters)
                return (nil, state.decodeWaits.count())
            case .decoded(let value, _)?:
                state.statistics.decodedHits += 1
                return (.decoded(value), [])
            case nil:
                return (.retry, [])
            }
        }
    }

    /// Returns once `count` callers have begun waiting for another caller's decode, since the
    /// transport was made: for tests.
    func waitForDecodeWaits(_ count: Int) async {
        await withCheckedContinuation { continuation in
            if !state.withLock({ $0.decodeWaits.watch(until: { $0 >= count }, continuation) }) { continuation.resume() }
        }
    }

    /// Ends the decode of `valueKey` for `entry` that ``claimDecode(_:on:)`` granted.
    ///
    /// A decoded value is kept as the entry's most recently used, and charged
    /// ``AnyDecodedValue/charge(forDecoding:)`` against the budget, when `entry` is still one of
    /// the variants stored for `key` and the key's charge with it still ``fits(_:)``. Making room
    /// for the charge evicts least recently used keys, which leave as every eviction does
    /// (``State/depart(_:because:into:)``). Beyond `limit` values for the entry, its least
    /// recently used ones are dropped and their charge returned. A failure is not kept. Only the
    /// ``Committer`` calls it, as the one writer of what the store holds.
    /// - Returns: the callers that waited for this decode, to be resumed outside the lock, and the
    ///   keys evicted to make room.
    func finishDecode(
        _ valueKey: DecodedValueKey,
        on entry: StoredResponse,
        for key: CacheKey,
        with result: Result<AnyDecodedValue, any Error>,
        limit: Int
    ) -> (waiters: [CheckedContinuation<DecodeOutcome, Never>], evicted: [CacheKey]) {
        var removal = Removal()
        let waiters = state.withLock { state -> [CheckedContinuation<DecodeOutcome, Never>] in
            guard case .decoding(let waiters)? = entry.decoded[valueKey] else { return [] }
            entry.decoded[valueKey] = nil
            if limit > 0, case .success(let value) = result, let variants = state.variants(holding: entry, for: key) {
                let cost = AnyDecodedValue.charge(forDecoding: entry.data)
                var values = entry.decoded
                let dropped = values.keep(value, cost: cost, for: valueKey, limit: limit)
                // A key's variants and their values stay within the largest entry allowed.
                if fits(variants.totalCost + cost - dropped.cost),
                    let evicted = state.entries.addCost(cost - dropped.cost, forKey: key)
                {
                    entry.decoded = values
                    state.statistics.decodedEvictions += dropped.dropped
                    for (evictedKey, _) in evicted {
                        state.depart(.key(evictedKey), because: .evicted, into: &removal)
                    }
                    state.syncGauges()
                    removal.released.append(evicted, count: evicted.count)
                }
            }
            return waiters
        }
        unindex(removal)
        removal.released.release()
        return (waiters, removal.departed)
    }
}
