import ArgumentParser

extension Tiler {
    struct Healthcheck: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "(not yet built)")
        func run() throws { throw ValidationError("Healthcheck is not built yet") }
    }
}
