import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// When and how soon a failed `GET` or `HEAD` is tried again (``CachedTransport/Configuration/Network/retryPolicy``).
///
/// A fetch is tried again after a connectivity failure (``retryableErrors``) or a status that
/// says the origin could not answer now (``retryableStatusCodes``), up to ``maximumAttempts``
/// attempts in all. Before each retry it waits a random time between zero and the backoff
/// (``initialDelay`` doubled for each retry, at most ``maximumDelay``): "full jitter", so that
/// clients failed by one outage do not come back together. A `Retry-After` on the failed answer,
/// in seconds or as an HTTP date, replaces that wait, at most ``maximumDelay``; a malformed one
/// is ignored.
///
/// Retries belong to the fetch, not to a caller: a hundred callers sharing one fetch cause one
/// sequence of attempts, a caller that cancels leaves at once while the others wait on, and the
/// wait ends, with no further attempt, when the last caller has left. Only the last attempt's
/// answer reaches the callers, and ``CachedTransport/Configuration/Freshness/staleIfError`` then applies to
/// it as to any failure. Each further attempt is sent anew, conditional on what is stored by
/// then, and an answer's age counts from it.
///
/// Only the fetches the transport makes for `GET` and `HEAD` are retried. Other methods never
/// are: the transport cannot know that sending them twice is harmless. Requests that pass
/// through as they were sent (their own conditions or `Range`, `no-store`, another scheme) are
/// sent once, as URLSession would.
///
/// ```swift
/// var configuration = CachedTransport.Configuration()
/// configuration.network.retryPolicy = RetryPolicy(maximumAttempts: 4, initialDelay: .milliseconds(200))
/// ```
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts in all, the first included; 1 never retries. Default: 3.
    public var maximumAttempts: Int
    /// The backoff before the first retry; each further retry doubles it. Default: 0.5 s.
    public var initialDelay: Duration
    /// The longest wait before a retry, for the backoff and for a `Retry-After`. Default: 30 s.
    public var maximumDelay: Duration
    /// The statuses that are tried again: 408, 429, 500, 502, 503 and 504 by default.
    public var retryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// The `URLError` codes that are tried again: the connectivity failures (not connected,
    /// cannot connect, cannot find the host, DNS failure, timed out, connection lost) by default,
    /// the same that let ``CachedTransport/Configuration/Freshness/staleIfError`` answer.
    public var retryableErrors: Set<URLError.Code> = RequestPlanner.connectivityErrors

    /// A policy of `maximumAttempts` attempts with backoff from `initialDelay` up to `maximumDelay`.
    public init(
        maximumAttempts: Int = 3, initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(30)
    ) {
        self.maximumAttempts = maximumAttempts
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
    }

    /// How long to wait before attempt `attempt + 1`, after attempt `attempt` (from 1) ended
    /// with `result`; nil when it is not to be retried.
    /// - Parameters:
    ///   - now: the wall-clock time a `Retry-After` date is compared with.
    ///   - random: a value in `0...1` that places the wait within the backoff.
    func delay(
        after result: Result<(Data, URLResponse), any Error>, attempt: Int, now: Date, random: Double
    ) -> Duration? {
        guard attempt < maximumAttempts else { return nil }
        switch result {
        case .failure(let error):
            guard let error = error as? URLError, retryableErrors.contains(error.code) else { return nil }
            return backoff(beforeRetry: attempt, random: random)
        case .success(let (_, response)):
            guard let http = response as? HTTPURLResponse, retryableStatusCodes.contains(http.statusCode) else {
                return nil
            }
            // A date is read against the origin's own clock when it sent one: the client's may be off.
            let originNow = http.headerValue("date").flatMap { HTTPDate.parse($0, now: now) } ?? now
            if let retryAfter = http.headerValue("retry-after"), let wait = Self.wait(retryAfter, now: originNow) {
                return min(wait, maximumDelay)
            }
            return backoff(beforeRetry: attempt, random: random)
        }
    }

    /// Full jitter: a random wait up to `initialDelay × 2^(retry − 1)`, at most ``maximumDelay``.
    private func backoff(beforeRetry retry: Int, random: Double) -> Duration {
        let doubled = initialDelay * (1 << min(retry - 1, 30))
        let ceiling = max(.zero, min(doubled, maximumDelay))
        return ceiling * min(1, max(0, random))
    }

    /// The wait a `Retry-After` value asks for (RFC 9110 section 10.2.3): whole seconds, or an HTTP
    /// date (no wait when it has passed); nil when it is neither.
    static func wait(_ retryAfter: String, now: Date) -> Duration? {
        let text = HeaderList.trimmed(retryAfter[...])
        if !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy(\.isNumber) {
            guard let seconds = Int64(text) else { return .seconds(Int64.max / 1_000_000_000) }
            return .seconds(seconds)
        }
        guard let date = HTTPDate.parse(String(text), now: now) else { return nil }
        return .milliseconds(max(0, Int64(date.timeIntervalSince(now) * 1000)))
    }
}
