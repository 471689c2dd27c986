import Foundation
import Prometheus
import Synchronization
import TilerCore
import TilerHTTP

/// What `tiler serve --metrics-port` exposes at `/metrics`, in the Prometheus text format
/// written by swift-prometheus (`PrometheusCollectorRegistry`); `docs/operating.md` says
/// what each metric means and what a healthy value looks like.
///
/// **What it costs a request.** The event loops tell `answered` of every answer: the
/// request's class is read from its path (`RouteClass`), its count and bytes are added
/// to relaxed atomic cells (one add each, no lock), and its duration is recorded in the
/// route's histogram (swift-prometheus': a lock taken and released, a walk over the
/// eleven buckets). The counters are handed to swift-prometheus at each scrape, by how
/// much each grew since the last (`collect`): a scrape's work grows with the number of
/// series, never with the number of requests.
///
/// **Bounded labels.** `route` is one of `RouteClass`'s thirteen values; `code` is one of
/// the statuses the server sends (`codes`), anything else `other`; storage `backend` and
/// `outcome`, render `outcome` and image `layout` are fixed sets. Nothing a request says
/// becomes a label value.
public final class ServerMetrics: HTTPObserver, Sendable {
    public let registry: PrometheusCollectorRegistry

    /// The statuses counted under their own `code` label; any other is `other`.
    static let codes = [
        200, 204, 206, 301, 302, 304, 400, 401, 403, 404, 405, 406, 408, 412, 413, 414, 416, 429, 431, 500, 501, 503, 504, 505,
    ]
    static let otherCode = codes.count
    /// The duration histogram's upper bounds, in seconds (Prometheus' defaults). The
    /// durations come from the event loop's coarse clock (a few milliseconds' resolution),
    /// so nothing finer than 5 ms is claimed.
    static let durationBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// Requests by route and code, and bytes by route: the source of truth, updated by
    /// the loops; published at each scrape.
    private let requests = AtomicCells(RouteClass.allCases.count * (codes.count + 1))
    private let responseBytes = AtomicCells(RouteClass.allCases.count)
    private let durations: [ValueHistogram]
    /// `durations` as unretained references, which `answered` reads: taking a class
    /// reference out of an array is a retain and a release on every answer.
    private nonisolated(unsafe) let durationTable: UnsafeMutablePointer<Unmanaged<ValueHistogram>>
    /// Connections refused at the cap; tile answers from memory (or an open tile) and
    /// answers that had to read storage.
    private let events = AtomicCells(Event.allCases.count)

    enum Event: Int, CaseIterable {
        case refusedConnection, tileCacheHit, tileCacheMiss, catalogScan, catalogScanFailure
    }

    /// Storage reads by backend and outcome, and their durations by backend.
    private let storageRequests = AtomicCells(StorageBackend.allCases.count * StorageOutcome.allCases.count)
    private let storageDurations: [ValueHistogram]

    /// What the last scrape published, and the series made so far (lazily, for the
    /// counters that have counted something).
    private struct Published {
        var counters: [String: Counter] = [:]
        var last: [String: Int] = [:]
        var cpuSeconds = 0.0
    }
    private let published = Mutex(Published())

    /// Read at each scrape: live gauges (connections, queues, cache, images).
    private let sources = Mutex<[@Sendable (ServerMetrics) -> Void]>([])

    public init(version: String = TilerVersion.current) {
        registry = PrometheusCollectorRegistry()
        let registry = registry
        durations = RouteClass.allCases.map { route in
            registry.makeValueHistogram(
                descriptor: Self.descriptor("tiler_http_request_duration_seconds"), labels: [("route", route.label)],
                buckets: Self.durationBuckets)
        }
        durationTable = .allocate(capacity: durations.count)
        for (i, histogram) in durations.enumerated() { (durationTable + i).initialize(to: .passUnretained(histogram)) }
        storageDurations = StorageBackend.allCases.map { backend in
            registry.makeValueHistogram(
                descriptor: Self.descriptor("tiler_storage_request_duration_seconds"), labels: [("backend", backend.rawValue)],
                buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
        }
        gauge("tiler_build_info", [("version", version)]).set(to: 1)
        gauge("process_start_time_seconds").set(to: ProcessFigures.startTime() ?? Date().timeIntervalSince1970)
    }

    deinit {
        durationTable.deinitialize(count: durations.count)
        durationTable.deallocate()
    }

    /// What each metric means: its `# HELP` line.
    static let help: [String: String] = [
        "tiler_http_requests_total": "HTTP requests answered, by route class and status code.",
        "tiler_http_request_duration_seconds":
            "Time from a request's first byte until its answer was queued (on the event loop's coarse clock), by route class.",
        "tiler_http_response_bytes_total": "Response body bytes sent (or announced, for HEAD), by route class.",
        "tiler_connections_open": "Client connections open now.",
        "tiler_connections_refused_total": "Connections refused at the connection limit (answered 503).",
        "tiler_tile_cache_hits_total": "Tile requests answered from memory or an open tile, without reading storage.",
        "tiler_tile_cache_misses_total": "Tile requests that had to read storage.",
        "tiler_tile_cache_bytes": "Bytes held by the response cache (bodies plus a fixed overhead per entry).",
        "tiler_tile_cache_entries": "Responses held by the response cache.",
        "tiler_renders_queued": "Drawings (IIIF images, DeepZoom levels below 0) waiting for a render thread.",
        "tiler_renders_running": "Drawings being made now.",
        "tiler_renders_total": "Drawings by outcome: done, refused (queue full: 503) or dropped (client left first).",
        "tiler_reads_queued": "Reads waiting for a blocking-pool thread, by lane (read, storage).",
        "tiler_storage_requests_total":
            "Reads from storage by backend (folder, archive, s3) and outcome (ok, missing, unavailable, error).",
        "tiler_storage_request_duration_seconds": "Time one read from storage took, by backend.",
        "tiler_storage_up": "1 while storage answers (always 1 for folder roots), 0 while it is down.",
        "tiler_images": "Images served, by layout (folder, archive, bucket, sources).",
        "tiler_catalog_scans_total": "Scans of ROOT (and of the sources folder) made.",
        "tiler_catalog_scan_failures_total": "Scans that could not read ROOT or list the bucket.",
        "tiler_ready": "1 when the server is ready to serve (/readyz answers 200), else 0.",
        "tiler_build_info": "The running tiler's version, as a label; the value is always 1.",
        "process_cpu_seconds_total": "User and system CPU time the process has used, in seconds.",
        "process_resident_memory_bytes": "Resident memory of the process, in bytes.",
        "process_open_fds": "File descriptors the process holds open.",
        "process_start_time_seconds": "When the process started, in seconds since 1970.",
    ]

    /// The name and help of `name`, as swift-prometheus takes them.
    static func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help[name] ?? "")
    }

    // MARK: What the loops and the store tell

    public func answered(_ head: borrowing HTTPRequestHead, status: Int, bytes: Int, milliseconds: Int64) {
        let route = RouteClass.of(target: head.target).rawValue
        count(route: route, status: status, bytes: bytes, milliseconds: milliseconds)
    }

    public func answeredUnreadRequest(status: Int, bytes: Int, milliseconds: Int64) {
        count(route: RouteClass.other.rawValue, status: status, bytes: bytes, milliseconds: milliseconds)
    }

    public func refusedConnection() { events.add(Event.refusedConnection.rawValue, 1) }

    @inline(__always)
    private func count(route: Int, status: Int, bytes: Int, milliseconds: Int64) {
        requests.add(route * (Self.codes.count + 1) + Self.codeIndex(status), 1)
        responseBytes.add(route, bytes)
        durationTable[route]._withUnsafeGuaranteedRef { $0.record(Double(milliseconds) / 1000) }
    }

    /// The index of `status` in `codes`, or `otherCode`.
    @inline(__always)
    static func codeIndex(_ status: Int) -> Int {
        switch status {
        case 200: 0
        case 304: 5
        case 404: 9
        default: codes.firstIndex(of: status) ?? otherCode
        }
    }

    /// A tile answered without reading storage (from memory or an open tile), or not.
    func tileAnswered(fromCache: Bool) {
        events.add((fromCache ? Event.tileCacheHit : Event.tileCacheMiss).rawValue, 1)
    }

    /// A scan of ROOT ran; `failed` when ROOT (or the bucket's listing) could not be read.
    func catalogScanned(failed: Bool) {
        events.add(Event.catalogScan.rawValue, 1)
        if failed { events.add(Event.catalogScanFailure.rawValue, 1) }
    }

    /// One read from storage (a folder's file, a local archive's bytes, an object's range).
    func storageRead(_ backend: StorageBackend, _ outcome: StorageOutcome, seconds: Double) {
        storageRequests.add(backend.index * StorageOutcome.allCases.count + outcome.index, 1)
        storageDurations[backend.index].record(seconds)
    }

    /// `read` is called at each scrape, before the text is written: it sets the gauges of
    /// what it watches.
    func addSource(_ read: @escaping @Sendable (ServerMetrics) -> Void) {
        sources.withLock { $0.append(read) }
    }

    // MARK: Scraping

    /// The Prometheus text exposition of every metric, as of now.
    public func scrape() -> [UInt8] {
        collect()
        return registry.emitToBuffer()
    }

    /// Publishes what the cells counted since the last scrape, and reads the live gauges.
    func collect() {
        published.withLock { p in
            for route in RouteClass.allCases {
                for code in 0...Self.codes.count {
                    let value = requests.load(route.rawValue * (Self.codes.count + 1) + code)
                    guard value > 0 else { continue }
                    let label = code == Self.otherCode ? "other" : String(Self.codes[code])
                    publish(&p, "tiler_http_requests_total", [("route", route.label), ("code", label)], value)
                }
                let bytes = responseBytes.load(route.rawValue)
                if bytes > 0 || route == .tile {
                    publish(&p, "tiler_http_response_bytes_total", [("route", route.label)], bytes)
                }
            }
            publish(&p, "tiler_connections_refused_total", [], events.load(Event.refusedConnection.rawValue))
            publish(&p, "tiler_tile_cache_hits_total", [], events.load(Event.tileCacheHit.rawValue))
            publish(&p, "tiler_tile_cache_misses_total", [], events.load(Event.tileCacheMiss.rawValue))
            publish(&p, "tiler_catalog_scans_total", [], events.load(Event.catalogScan.rawValue))
            publish(&p, "tiler_catalog_scan_failures_total", [], events.load(Event.catalogScanFailure.rawValue))
            for backend in StorageBackend.allCases {
                for outcome in StorageOutcome.allCases {
                    let value = storageRequests.load(backend.index * StorageOutcome.allCases.count + outcome.index)
                    guard value > 0 else { continue }
                    publish(
                        &p, "tiler_storage_requests_total", [("backend", backend.rawValue), ("outcome", outcome.rawValue)], value)
                }
            }
            let process = ProcessFigures.now()
            if let cpu = process.cpuSeconds, cpu > p.cpuSeconds {
                counter(&p, "process_cpu_seconds_total", []).increment(by: cpu - p.cpuSeconds)
                p.cpuSeconds = cpu
            }
            if let rss = process.residentBytes { gauge("process_resident_memory_bytes").set(to: Double(rss)) }
            if let fds = process.openFiles { gauge("process_open_fds").set(to: Double(fds)) }
        }
        for read in sources.withLock({ $0 }) { read(self) }
    }

    /// Sets the counter `name{labels}` to `value`, a total counted elsewhere (the pool's).
    func setCounter(_ name: String, _ labels: [(String, String)], _ value: Int) {
        published.withLock { publish(&$0, name, labels, value) }
    }

    /// Sets the counter `name{labels}` to `value` by incrementing it by what it grew.
    private func publish(_ p: inout Published, _ name: String, _ labels: [(String, String)], _ value: Int) {
        let key = Self.key(name, labels)
        let grew = value - (p.last[key] ?? 0)
        let series = counter(&p, name, labels)
        if grew > 0 {
            series.increment(by: Int64(grew))
            p.last[key] = value
        }
    }

    private func counter(_ p: inout Published, _ name: String, _ labels: [(String, String)]) -> Counter {
        let key = Self.key(name, labels)
        if let made = p.counters[key] { return made }
        let made = registry.makeCounter(descriptor: Self.descriptor(name), labels: labels)
        p.counters[key] = made
        return made
    }

    /// The gauge `name{labels}` (made once; swift-prometheus returns the same one after).
    func gauge(_ name: String, _ labels: [(String, String)] = []) -> Gauge {
        registry.makeGauge(descriptor: Self.descriptor(name), labels: labels)
    }

    private static func key(_ name: String, _ labels: [(String, String)]) -> String {
        labels.reduce(name) { $0 + "|" + $1.0 + "=" + $1.1 }
    }
}

/// Where a storage read went: the `backend` label.
enum StorageBackend: String, CaseIterable, Sendable {
    case folder, archive, s3
    var index: Int { Self.allCases.firstIndex(of: self)! }
}

/// How a storage read ended: the `outcome` label.
enum StorageOutcome: String, CaseIterable, Sendable {
    /// The bytes were read.
    case ok
    /// Nothing is stored there (a tile outside a sparse pyramid, a deleted file).
    case missing
    /// Storage did not answer, or refused (timeouts, 5xx, refused credentials).
    case unavailable
    /// What was read is unusable (damaged, too large, the object changed).
    case error
    var index: Int { Self.allCases.firstIndex(of: self)! }

    /// The outcome a source's error stands for.
    init(_ error: SourceError) {
        switch error {
        case .absent, .refused: self = .missing
        case .unavailable, .busy: self = .unavailable
        case .damaged, .replaced: self = .error
        }
    }
}

/// Counters that event loops and pool threads add to without a lock: relaxed atomic
/// adds, read at each scrape.
final class AtomicCells: Sendable {
    private nonisolated(unsafe) let cells: UnsafeMutablePointer<Atomic<Int>>
    let count: Int

    init(_ count: Int) {
        self.count = count
        cells = .allocate(capacity: count)
        for i in 0..<count { (cells + i).initialize(to: Atomic(0)) }
    }

    deinit {
        cells.deinitialize(count: count)
        cells.deallocate()
    }

    @inline(__always)
    func add(_ index: Int, _ value: Int) {
        (cells + index).pointee.add(value, ordering: .relaxed)
    }

    func load(_ index: Int) -> Int {
        (cells + index).pointee.load(ordering: .relaxed)
    }
}

/// What `/proc/self` says about this process: CPU time, resident memory, open files and
/// its start time (nil where it cannot be read, as on a system without /proc).
enum ProcessFigures {
    struct Figures {
        var cpuSeconds: Double?
        var residentBytes: Int?
        var openFiles: Int?
    }

    static func now() -> Figures {
        var figures = Figures()
        if let fields = statFields() {
            let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
            // utime and stime (fields 14 and 15 of /proc/PID/stat; here from field 3 on).
            if fields.count > 21, let user = Double(fields[11]), let system = Double(fields[12]), ticks > 0 {
                figures.cpuSeconds = (user + system) / ticks
            }
            // rss (field 24), in pages.
            if fields.count > 21, let pages = Int(fields[21]) { figures.residentBytes = pages * Int(sysconf(Int32(_SC_PAGESIZE))) }
        }
        if let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") { figures.openFiles = names.count }
        return figures
    }

    /// Seconds since 1970 at which this process started: its start in clock ticks after
    /// boot (field 22 of /proc/self/stat) plus the boot time (`btime` in /proc/stat).
    static func startTime() -> Double? {
        guard let fields = statFields(), fields.count > 19, let started = Double(fields[19]),
            let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ticks > 0 ? boot + started / ticks : nil
    }

    /// The fields of /proc/self/stat after the command name (which may hold spaces and
    /// parentheses: the fields start after the last `)`), from field 3 (state) on.
    private static func statFields() -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }
}
