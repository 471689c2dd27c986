// cut-floor: each piece of `tiler cut` timed alone, on this machine, for one JPEG input.
//
//   cut-floor INPUT.jpg WORK [--encoders png,jpeg,webp,png-libpng-paeth,png-libpng-average,png-libpng-up,
//                             png-libspng,png-libdeflate-1,png-libdeflate-6]
//
// 1. decode: the whole JPEG with libjpeg (the decoder libvips calls) into memory, on
//    one thread (a baseline JPEG cannot be decoded in parallel);
// 2. shrink: every level from the one above with tiler's 2×2 box filter
//    (AreaAverage.shrinkRows), on one thread, as the cutter does;
// 3. encode: every tile of every level with each encoder, on all cores
//    (DispatchQueue.concurrentPerform), bytes counted and dropped: tiler's TileEncoder
//    (PNG with its settings: Up filter, libdeflate 1; JPEG Q85, WebP Q80), tiler's
//    libpng path with its settings before libdeflate (Paeth, zlib 2 Z_RLE) and with the
//    Average and Up filters, libspng (Paeth, zlib 2 Z_RLE), and libdeflate behind a PNG
//    writer of this tool (Paeth, one IDAT) at levels 1 and 6;
// 4. files: the pyramid's folders and files under WORK/files-FORMAT, each file as
//    large as that format's tile, written on all cores as the cutter writes them
//    (open, one write, close); the caller deletes WORK.
//
// Prints one JSON object: wall and CPU seconds (user, system) of each piece.
import CFloor
import Dispatch
import Foundation
import TilerCore
import TilerImaging

struct Figures: Encodable {
    var wall: Double
    var user: Double
    var sys: Double
    var cpu: Double { user + sys }
    var bytes: Int?
    var count: Int?

    enum CodingKeys: String, CodingKey { case wall, user, sys, cpu, bytes, count }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode((wall * 1000).rounded() / 1000, forKey: .wall)
        try c.encode((user * 1000).rounded() / 1000, forKey: .user)
        try c.encode((sys * 1000).rounded() / 1000, forKey: .sys)
        try c.encode((cpu * 1000).rounded() / 1000, forKey: .cpu)
        try c.encodeIfPresent(bytes, forKey: .bytes)
        try c.encodeIfPresent(count, forKey: .count)
    }
}

struct FloorError: Error, CustomStringConvertible {
    let description: String
}

/// Runs `body` and measures it: wall time, and the CPU time of the whole process.
func measured(_ body: () throws -> (bytes: Int?, count: Int?)) rethrows -> Figures {
    func now() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
    }
    func cpu() -> (Double, Double) {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return (seconds(usage.ru_utime), seconds(usage.ru_stime))
    }
    let (u0, s0) = cpu(), t0 = now()
    let (bytes, count) = try body()
    let t1 = now(), (u1, s1) = cpu()
    return Figures(wall: t1 - t0, user: u1 - u0, sys: s1 - s0, bytes: bytes, count: count)
}

/// One level's pixels: rows of `width * bands` bytes.
struct LevelPixels: @unchecked Sendable {
    let level: Level
    let pixels: UnsafeMutablePointer<UInt8>
    let rowBytes: Int
}

/// A tile to encode: its pixels inside a level, and its size.
struct TileJob: @unchecked Sendable {
    let coordinate: TileCoordinate
    let pixels: UnsafePointer<UInt8>
    let stride: Int
    let width: Int
    let height: Int
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: cut-floor INPUT.jpg WORK [--encoders LIST]\n".utf8))
    exit(2)
}
let input = arguments[1], work = arguments[2]
var encoderNames = ["png", "jpeg", "webp", "png-libpng-paeth", "png-libpng-average", "png-libpng-up", "png-libspng",
                    "png-libdeflate-1", "png-libdeflate-6"]
if let i = arguments.firstIndex(of: "--encoders"), i + 1 < arguments.count {
    encoderNames = arguments[i + 1].split(separator: ",").map(String.init)
}

func log(_ text: String) { FileHandle.standardError.write(Data("cut-floor: \(text)\n".utf8)) }

do {
    var output: [String: Any] = [:]

    // 1. decode
    var width: Int32 = 0, height: Int32 = 0, bands: Int32 = 0
    var decoded: UnsafeMutablePointer<UInt8>?
    let decode = measured {
        decoded = floor_decode_jpeg(input, &width, &height, &bands)
        return (nil, nil)
    }
    guard let full = decoded else { throw FloorError(description: "cannot decode \(input) with libjpeg") }
    let bandCount = Int(bands)
    log("decode \(width)x\(height)x\(bands): \(decode.wall) s")
    let geometry = try PyramidGeometry(width: Int(width), height: Int(height), tileSize: 256)

    // 2. shrink, level by level (the cutter interleaves them; the work is the same)
    var levels: [Int: LevelPixels] = [geometry.maxLevel: LevelPixels(level: geometry.level(geometry.maxLevel), pixels: full,
                                                                      rowBytes: Int(width) * bandCount)]
    let shrink = measured {
        var pixelsIn = 0
        for z in stride(from: geometry.maxLevel - 1, through: 0, by: -1) {
            let above = levels[z + 1]!, level = geometry.level(z)
            let rowBytes = level.width * bandCount
            let pixels = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes * level.height)
            for y in 0..<level.height {
                let upper = above.pixels + 2 * y * above.rowBytes
                let lower: UnsafePointer<UInt8>? = 2 * y + 1 < above.level.height ? UnsafePointer(upper + above.rowBytes) : nil
                AreaAverage.shrinkRows(upper, lower, width: above.level.width, bands: bandCount, into: pixels + y * rowBytes)
            }
            levels[z] = LevelPixels(level: level, pixels: pixels, rowBytes: rowBytes)
            pixelsIn += above.level.width * above.level.height
        }
        return (nil, pixelsIn)
    }
    log("shrink: \(shrink.wall) s")

    var jobs: [TileJob] = []
    for z in geometry.levelNumbers {
        let lv = levels[z]!
        for row in 0..<lv.level.rows {
            for column in 0..<lv.level.columns {
                let x = column * 256, y = row * 256
                jobs.append(TileJob(coordinate: TileCoordinate(level: z, row: row, column: column),
                                    pixels: UnsafePointer(lv.pixels + y * lv.rowBytes + x * bandCount), stride: lv.rowBytes,
                                    width: min(256, lv.level.width - x), height: min(256, lv.level.height - y)))
            }
        }
    }

    // 3. encode
    typealias Encode = @Sendable (TileJob, Bool) throws -> (Int, UnsafeMutablePointer<UInt8>?)
    func tiler(_ encoder: TileEncoder) -> Encode {
        { job, keep in
            try encoder.withEncoded(pixels: job.pixels, stride: job.stride, width: job.width, height: job.height,
                                    bands: bandCount) { bytes in
                guard keep else { return (bytes.count, nil) }
                let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes.count)
                copy.initialize(from: bytes.bindMemory(to: UInt8.self).baseAddress!, count: bytes.count)
                return (bytes.count, copy)
            }
        }
    }
    func c(_ body: @escaping @Sendable (TileJob, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int) -> Encode {
        { job, keep in
            var kept: UnsafeMutablePointer<UInt8>?
            let n = keep ? body(job, &kept) : body(job, nil)
            guard n > 0 else { throw FloorError(description: "encoding tile \(job.coordinate) failed") }
            return (n, kept)
        }
    }
    let rle: Int32 = 3  // Z_RLE, as tiler's libpng settings before libdeflate
    func libpng(_ filter: PNGSettings.Filter) -> PNGSettings {
        PNGSettings(zlibLevel: 2, filter: filter, strategy: .rle, library: .libpng)
    }
    let encoders: [String: (Encode, Bool)] = [
        "png": (tiler(TileEncoder(format: .png)), true),
        // tiler's settings before libdeflate: libpng, Paeth, zlib 2 Z_RLE; and libpng with
        // cheaper row filters at the same zlib settings.
        "png-libpng-paeth": (tiler(TileEncoder(format: .png, png: libpng(.paeth))), true),
        "png-libpng-average": (tiler(TileEncoder(format: .png, png: libpng(.average))), true),
        "png-libpng-up": (tiler(TileEncoder(format: .png, png: libpng(.up))), true),
        "jpeg": (tiler(TileEncoder(format: .jpeg)), false),
        "webp": (tiler(TileEncoder(format: .webp)), false),
        "png-libspng": (c { floor_spng_encode($0.pixels, $0.stride, Int32($0.width), Int32($0.height), Int32(bandCount),
                                              4 /* SPNG_FILTER_CHOICE_PAETH */, 2, rle, $1) }, true),
        "png-libdeflate-1": (c { floor_deflate_encode($0.pixels, $0.stride, Int32($0.width), Int32($0.height),
                                                      Int32(bandCount), 1, $1) }, true),
        "png-libdeflate-6": (c { floor_deflate_encode($0.pixels, $0.stride, Int32($0.width), Int32($0.height),
                                                      Int32(bandCount), 6, $1) }, true),
    ]
    var encoded: [String: Any] = [:]
    var sizes: [String: [Int]] = [:]
    for name in encoderNames {
        guard let (encode, isPNG) = encoders[name] else { throw FloorError(description: "unknown encoder \(name)") }
        // Not timed: the first full-resolution tile decodes (libspng) to its own pixels.
        if isPNG {
            let job = jobs.first { $0.coordinate.level == geometry.maxLevel }!
            let (n, bytes) = try encode(job, true)
            defer { bytes?.deallocate() }
            guard floor_png_matches(bytes, n, job.pixels, job.stride, Int32(job.width), Int32(job.height), Int32(bandCount)) == 0 else {
                throw FloorError(description: "\(name): the PNG of tile \(job.coordinate) does not decode to its pixels")
            }
        }
        nonisolated(unsafe) let lengths = UnsafeMutableBufferPointer<Int>.allocate(capacity: jobs.count)
        lengths.initialize(repeating: 0)
        defer { lengths.deallocate() }
        let failure = NSLock()
        nonisolated(unsafe) var firstError: (any Error)?
        let all = jobs
        let figures = measured {
            DispatchQueue.concurrentPerform(iterations: all.count) { i in
                do {
                    lengths[i] = try encode(all[i], false).0
                } catch {
                    failure.withLock { if firstError == nil { firstError = error } }
                }
            }
            return (lengths.reduce(0, +), all.count)
        }
        if let firstError { throw firstError }
        sizes[name] = Array(lengths)
        encoded[name] = figures
        log("encode \(name): \(figures.wall) s wall, \(figures.cpu) s CPU, \(figures.bytes ?? 0) bytes")
    }
    output["encode"] = encoded

    // 4. files, for tiler's formats
    var files: [String: Any] = [:]
    for (name, ext) in [("png", "png"), ("jpeg", "jpg"), ("webp", "webp")] {
        guard let lengths = sizes[name] else { continue }
        let root = "\(work)/files-\(name)"
        let largest = lengths.max() ?? 0
        nonisolated(unsafe) let zeros = UnsafeMutableRawPointer.allocate(byteCount: max(1, largest), alignment: 16)
        zeros.initializeMemory(as: UInt8.self, repeating: 0, count: max(1, largest))
        defer { zeros.deallocate() }
        let all = jobs
        let failure = NSLock()
        nonisolated(unsafe) var firstError: String?
        let figures = try measured {
            for path in [work, root] where mkdir(path, 0o777) != 0 && errno != EEXIST {
                throw FloorError(description: "mkdir \(path): \(String(cString: strerror(errno)))")
            }
            // Folders one by one, as the cutter makes each row's folder before its tiles.
            for z in geometry.levelNumbers {
                mkdir("\(root)/\(z)", 0o777)
                for row in 0..<geometry.level(z).rows { mkdir("\(root)/\(z)/\(row)", 0o777) }
            }
            DispatchQueue.concurrentPerform(iterations: all.count) { i in
                let t = all[i].coordinate
                let path = "\(root)/\(t.level)/\(t.row)/\(t.column).\(ext)"
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
                if fd < 0 || write(fd, zeros, lengths[i]) != lengths[i] {
                    let why = String(cString: strerror(errno))
                    failure.withLock { if firstError == nil { firstError = "\(path): \(why)" } }
                }
                if fd >= 0 { close(fd) }
            }
            return (lengths.reduce(0, +), all.count)
        }
        if let firstError { throw FloorError(description: "writing \(firstError)") }
        files[name] = figures
        log("files \(name): \(figures.wall) s wall, \(figures.sys) s system")
    }
    output["files"] = files
    output["decode"] = decode
    output["shrink"] = shrink
    output["image"] = ["width": Int(width), "height": Int(height), "bands": bandCount, "tiles": jobs.count]

    // Figures → JSON: encode each Figures with JSONEncoder, the rest as plain objects.
    func json(_ value: Any) throws -> Any {
        switch value {
        case let f as Figures: return try JSONSerialization.jsonObject(with: JSONEncoder().encode(f))
        case let d as [String: Any]: return try d.mapValues(json)
        default: return value
        }
    }
    let data = try JSONSerialization.data(withJSONObject: try json(output), options: [.prettyPrinted, .sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
} catch {
    log("\(error)")
    exit(1)
}
