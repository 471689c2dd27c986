import Foundation
import Testing
import TilerTestSupport

/// `tiler serve` runs one event loop per core the process may run on: its CPU affinity,
/// as `taskset` or a container's `--cpuset-cpus` sets it, not the machine's core count.
@Suite struct CoreCountTests {
    /// Each event loop listens on a socket of its own (`SO_REUSEPORT`), all bound before
    /// the server announces its port, so the listening sockets on that port that `process`
    /// holds count the loops. Only its own: /proc/net/tcp lists every socket of the network
    /// namespace, which in a container sharing the host's holds other processes' too (a
    /// run in `scripts/container-suite` once counted another listener on the same port).
    static func listeningSockets(port: Int, of process: Process) throws -> Set<Substring> {
        let descriptors = "/proc/\(process.processIdentifier)/fd"
        let inodes = Set(
            try FileManager.default.contentsOfDirectory(atPath: descriptors).compactMap { fd -> Substring? in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(descriptors)/\(fd)"),
                    target.hasPrefix("socket:[")
                else { return nil }
                return Substring(target.dropFirst("socket:[".count).dropLast())
            })
        let table = try String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)
        let hexPort = String(format: ":%04X", port)
        // Distinct inodes: the kernel writes the table a page at a time, and a socket that
        // moves in its hash table between two reads can be listed twice (or not at all:
        // the callers poll).
        return Set(
            table.split(separator: "\n").dropFirst().compactMap { line -> Substring? in
                let fields = line.split(separator: " ")
                guard fields.count > 9, fields[1].hasSuffix(hexPort), fields[3] == "0A", inodes.contains(fields[9]) else {
                    return nil
                }
                return fields[9]
            }
        )
    }

    /// Whether `process` comes to hold exactly `count` listening sockets on `port`. One read
    /// of /proc/net/tcp is no snapshot: under load, with thousands of sockets opening and
    /// closing, a read once missed one of three listeners (scripts/test-repeat under
    /// stress-ng, alongside a container suite). The count polled until it is right: a
    /// server with the wrong number of loops never gets there.
    static func holdsListeningSockets(_ count: Int, port: Int, of process: Process) throws -> Bool {
        // The sockets seen over every read so far: each read can miss a listener (the table
        // moves under it while other processes open and close sockets, as a test run beside
        // this one does by the thousand), never invent one of the process's own.
        var seen = Set<Substring>()
        return try eventually(within: 30) {
            seen.formUnion(try listeningSockets(port: port, of: process))
            return seen.count == count
        }
    }

    /// The processors this test may run on, from `/proc/self/status` (`Cpus_allowed_list`,
    /// such as `0-1,4`).
    static func allowedProcessors() throws -> [Int] {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") })
        return line.dropFirst("Cpus_allowed_list:".count).split(separator: ",").flatMap { part -> [Int] in
            let bounds = part.trimmingCharacters(in: .whitespaces).split(separator: "-").compactMap { Int($0) }
            return bounds.count == 2 ? Array(bounds[0]...bounds[1]) : bounds
        }
    }

    @Test func oneEventLoopPerAllowedCore() throws {
        let taskset = "/usr/bin/taskset"
        try #require(FileManager.default.isExecutableFile(atPath: taskset), "taskset (util-linux) is missing")
        let scratch = try Scratch()
        defer { scratch.cleanUp() }
        try FileManager.default.createDirectory(atPath: scratch.path("root"), withIntermediateDirectories: true)
        let allowed = try Self.allowedProcessors()
        try #require(!allowed.isEmpty)

        let all = try ServeProcess([scratch.path("root"), "--port", "0"])
        defer { all.stop() }
        #expect(try Self.holdsListeningSockets(allowed.count, port: all.port, of: all.process))

        let one = try ServeProcess([scratch.path("root"), "--port", "0"], launcher: [taskset, "-c", String(allowed[0])])
        defer { one.stop() }
        #expect(try Self.holdsListeningSockets(1, port: one.port, of: one.process))

        // An explicit count still wins.
        let three = try ServeProcess(
            [scratch.path("root"), "--port", "0", "--threads", "3"], launcher: [taskset, "-c", String(allowed[0])])
        defer { three.stop() }
        #expect(try Self.holdsListeningSockets(3, port: three.port, of: three.process))
    }
}
