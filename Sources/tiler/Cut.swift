import ArgumentParser

extension Tiler {
    struct Cut: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "(not yet built)")
        func run() throws { throw ValidationError("Cut is not built yet") }
    }
}
