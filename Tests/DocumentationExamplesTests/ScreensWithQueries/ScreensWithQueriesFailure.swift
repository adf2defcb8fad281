// swift-format-ignore-file
// A block of ScreensWithQueries.md, verbatim as a reader copies it: DocumentationBlocksTests checks it is the document's.
import TransportCache
import TransportCacheQueries

@MainActor
func failureMessage(for articles: CachedQuery<[Article]>) -> String? {
    switch articles.failure {
    case .status(404)?: "There are no articles here."
    case .status(let status)?: "The server refused the request (\(status))."
    case .invalidData?: "The server sent something this app cannot read."
    case .network?: "The server could not be reached."
    case .other?: "Something went wrong."
    case nil: nil
    }
}
