/// The app's own model type that the README and the articles decode, as a reader's app has one.
struct Article: Codable, Sendable, Equatable {
    let title: String
}
