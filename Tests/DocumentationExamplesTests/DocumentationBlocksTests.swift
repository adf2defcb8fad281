import Foundation
import Testing

/// Keeps every ```swift block of README.md and of the DocC articles (`Sources/*/*.docc/*.md`)
/// compiling as a reader copies it.
///
/// Each document has a folder in this target named after it (`README`, or the article's file
/// name), whose files hold its blocks verbatim and are compiled with the tests. This test fails
/// when a block of a document is found in none of its folder's files, so a block edited in the
/// docs without its compiled copy fails the tests. The rules for a copy:
/// - A block appears as its lines, in order and unchanged. Only an indentation common to all its
///   lines may be added, when a fragment sits inside the smallest context a reader would have
///   (the imports of the file, a function or type declaring what the fragment uses, a line after
///   it that uses what it declares). Copies start with `// swift-format-ignore-file`, so the
///   formatter never rewrites them.
/// - A block that starts with `import` starts its own file.
/// - Names declared at the top level of a copy are unique in this target, which is one module.
/// - A block that cannot compile on Linux (SwiftUI) goes between `#if canImport(SwiftUI)` and
///   `#endif` in its copy: checked verbatim here on every platform, compiled on Apple platforms.
@Suite("Documentation examples")
struct DocumentationBlocksTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// README.md and every article of every DocC catalog under Sources/.
    static let documents: [String] = {
        var documents = ["README.md"]
        let sources = root.appendingPathComponent("Sources")
        let modules = (try? FileManager.default.contentsOfDirectory(atPath: sources.path)) ?? []
        for module in modules.sorted() {
            let catalog = "Sources/\(module)/\(module).docc"
            let articles =
                (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(catalog).path)) ?? []
            documents += articles.filter { $0.hasSuffix(".md") }.sorted().map { "\(catalog)/\($0)" }
        }
        return documents
    }()

    @Test("the documents are found")
    func documentsAreFound() {
        #expect(Self.documents.contains("Sources/TransportCache/TransportCache.docc/TransportCache.md"))
        #expect(Self.documents.count > 2)
    }

    @Test("every Swift block of a document is in its compiled copies", arguments: documents)
    func everyBlockIsCompiled(document: String) throws {
        let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
        let name = (document as NSString).lastPathComponent.replacingOccurrences(of: ".md", with: "")
        let copies = Self.copies(of: name)
        for block in Self.swiftBlocks(in: text) {
            #expect(
                copies.contains { Self.lines(block, appearIn: $0) },
                "\(document): this block is in no file of Tests/DocumentationExamplesTests/\(name)/:\n\(block.joined(separator: "\n"))"
            )
        }
    }

    /// The lines of every Swift file in the document's folder of copies.
    static func copies(of name: String) -> [[String]] {
        let folder = root.appendingPathComponent("Tests/DocumentationExamplesTests/\(name)")
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return files.filter { $0.hasSuffix(".swift") }.compactMap { file in
            try? String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                .components(separatedBy: "\n")
        }
    }

    /// The lines of each ```swift block, less the indentation of its fence (a block in a list).
    static func swiftBlocks(in text: String) -> [[String]] {
        var blocks: [[String]] = []
        var current: [String]?
        var indentation = 0
        for line in text.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
                indentation = line.prefix { $0 == " " }.count
            } else if let block = current, trimmed == "```" {
                blocks.append(block)
                current = nil
            } else if current != nil {
                current?.append(trimmed.isEmpty ? "" : String(line.dropFirst(min(indentation, line.count))))
            }
        }
        return blocks
    }

    /// Whether `block` appears in `file` as consecutive lines, each with the same added indentation.
    static func lines(_ block: [String], appearIn file: [String]) -> Bool {
        guard let first = block.first, !first.isEmpty, block.count <= file.count else { return false }
        for start in 0...(file.count - block.count) where file[start].hasSuffix(first) {
            let indentation = String(file[start].dropLast(first.count))
            guard indentation.allSatisfy({ $0 == " " }) else { continue }
            let matches = block.indices.allSatisfy { offset in
                let line = file[start + offset]
                if block[offset].isEmpty { return line.trimmingCharacters(in: .whitespaces).isEmpty }
                return line == indentation + block[offset]
            }
            if matches { return true }
        }
        return false
    }
}
