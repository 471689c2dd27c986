import ArgumentParser

extension Tiler {
    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "(not yet built)")
        func run() throws { throw ValidationError("Serve is not built yet") }
    }
}
