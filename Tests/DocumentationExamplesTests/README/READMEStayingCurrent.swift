// swift-format-ignore-file
// A block of README.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TransportCache

func readmeStayingCurrent() async {
    var configuration = CachedTransport.Configuration()
    configuration.stayingCurrent.revalidatesOnForeground = true  // Apple platforms: on the app's did-become-active
    configuration.stayingCurrent.revalidatesOnReconnect = true   // Apple platforms: when NWPathMonitor is satisfied again
    configuration.stayingCurrent.refreshIntervals = [EndpointSetting(.pathPrefix("/scores"), .seconds(15))]  // while watched
    configuration.network.retryPolicy = RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(500))
    let transport = CachedTransport(configuration: configuration)

    // Anywhere, from the app's own lifecycle code (on Linux, the only way):
    await transport.revalidateWatched()                // what live streams watch
    print(await transport.revalidateAll())             // "revalidated 120 (3 changed, 0 failed), skipped 8"
}
