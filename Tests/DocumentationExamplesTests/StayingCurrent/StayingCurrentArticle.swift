// swift-format-ignore-file
// The blocks of StayingCurrent.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import TransportCache

func stayingCurrentArticleTransport() -> CachedTransport {
    var configuration = CachedTransport.Configuration()
    configuration.stayingCurrent.revalidatesOnForeground = true
    configuration.stayingCurrent.revalidatesOnReconnect = true
    configuration.stayingCurrent.refreshIntervals = [EndpointSetting(.pathPrefix("/scores"), .seconds(15))]
    configuration.network.retryPolicy = RetryPolicy()
    let transport = CachedTransport(configuration: configuration)
    return transport
}

func stayingCurrentArticleTicks(configuration: inout CachedTransport.Configuration) async {
    let clock = ManualCacheClock()
    configuration.clock = clock.cacheClock
    // … start watching, then for each tick:
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(15))
}

func stayingCurrentArticleLifecycle(transport: CachedTransport) async {
    // Anywhere, from the app's own lifecycle code (on Linux, the only way):
    await transport.revalidateWatched()                // what live streams watch
    print(await transport.revalidateAll())             // "revalidated 120 (3 changed, 0 failed), skipped 8"
}
