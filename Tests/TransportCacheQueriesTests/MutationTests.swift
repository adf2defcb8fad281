import Foundation
import Testing
import TransportCache
import TransportCacheQueries
import TransportCacheTesting
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a test compares of a mutation.
struct MutationShown: Equatable {
    var isPending: Bool
    var error: String?
    var result: Int?
}

@MainActor
func observe(_ mutation: CachedMutation<String, Int>) -> ObservedStates<MutationShown> {
    ObservedStates {
        MutationShown(isPending: mutation.isPending, error: errorName(mutation.error), result: mutation.result)
    }
}

@Suite("Mutations")
@MainActor
struct MutationTests {
    /// A transport holding the list "one", the list's query, and a mutation adding a title to it
    /// whose write waits at `gate`, then returns the new count or throws `failure`.
    func setUp(gate: Gate, failure: URLError? = nil) async throws -> (
        ScriptedOrigin, CachedQuery<[Article]>, CachedMutation<String, Int>
    ) {
        let (origin, transport) = try await transportHoldingOne()
        let list = CachedQuery([Article].self, for: URLRequest(url: articlesURL), in: transport)
        let mutation = CachedMutation(in: transport) { (title: String) in
            [
                try ProvisionalAnswer(
                    for: URLRequest(url: articlesURL), value: (list.value ?? []) + [Article(title: title)])
            ]
        } write: { title in
            await gate.wait()
            if let failure { throw failure }
            return 2
        } confirmed: { _ in
            [try ProvisionalAnswer(for: URLRequest(url: articlesURL), value: articles("one", "two"))]
        }
        return (origin, list, mutation)
    }

    @Test("a run is pending while its write runs, shows its provisional answer, then its result")
    func runSucceeds() async throws {
        let gate = Gate()
        let (origin, list, mutation) = try await setUp(gate: gate)
        let observed = observe(mutation)
        let listObserved = observe(list)

        let run = Task { await mutation.run("two (draft)") }
        await listObserved.waitForChanges(1)
        #expect(mutation.isPending)
        gate.open()
        let result = await run.value
        await listObserved.waitForChanges(2)

        #expect(result == 2)
        #expect(
            observed.states == [
                MutationShown(isPending: false), MutationShown(isPending: true),
                MutationShown(isPending: false, result: 2),
            ])
        #expect(
            listObserved.states.map(\.value) == [
                articles("one"), articles("one", "two (draft)"), articles("one", "two"),
            ])
        #expect(origin.callCount == 1)
    }

    @Test("a failed write ends with its error, and the provisional answer rolls back")
    func runFails() async throws {
        let gate = Gate()
        let (_, list, mutation) = try await setUp(gate: gate, failure: URLError(.timedOut))
        let observed = observe(mutation)
        let listObserved = observe(list)

        let run = Task { await mutation.run("two (draft)") }
        await listObserved.waitForChanges(1)
        gate.open()
        let result = await run.value
        await listObserved.waitForChanges(2)

        #expect(result == nil)
        #expect(
            observed.states == [
                MutationShown(isPending: false), MutationShown(isPending: true),
                MutationShown(isPending: false, error: "URLError \(URLError.Code.timedOut.rawValue)"),
            ])
        #expect(listObserved.states.map(\.value) == [articles("one"), articles("one", "two (draft)"), articles("one")])
    }

    @Test("a provisional answer that cannot be stored fails the run before its write")
    func notCacheableProvisional() async throws {
        let origin = ScriptedOrigin()
        let transport = makeTransport(origin)
        var wrote = false
        let mutation = CachedMutation(in: transport) { (_: String) in
            [ProvisionalAnswer(for: URLRequest(url: URL(string: "file:///tmp/list")!), data: Data())]
        } write: { _ in
            wrote = true
            return 1
        }
        let observed = observe(mutation)

        let result = await mutation.run("x")

        #expect(result == nil)
        #expect(!wrote)
        #expect((mutation.error as? LocalWriteError) == .notCacheable(URL(string: "file:///tmp/list")!))
        #expect(observed.changes == 2)
        #expect(observed.states.last == MutationShown(isPending: false, error: "LocalWriteError"))
    }
}
