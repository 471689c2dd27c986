import CSystemShims
import Glibc

/// The process-wide settings the server touches.
public enum ProcessLimits {
    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (at most 2^20) and returns the
    /// soft limit then in force.
    public static func raiseFileLimit() throws(SystemCallError) -> Int {
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        _ = try systemCall("getrlimit") { getrlimit(resource, &limit) }
        let cap = rlim_t(1 << 20)
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max == rlim_t.max ? cap : min(limit.rlim_max, cap)
            do {
                _ = try systemCall("setrlimit") { setrlimit(resource, &raised) }
                limit = raised
            } catch {
                // Refused (EPERM in some sandboxes): the limit there is stays in force.
            }
        }
        return limit.rlim_cur == rlim_t.max ? Int(cap) : Int(limit.rlim_cur)
    }

    /// The processors this process may run on: its CPU affinity (`sched_getaffinity`), so
    /// a process started under `taskset`, or in a container given some of the machine's
    /// cores, counts the cores it has, not the machine's; the online processors when the
    /// affinity cannot be read.
    public static func allowedProcessors() -> Int {
        let allowed = tsys_allowed_cpus()
        return allowed > 0 ? Int(allowed) : max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }
}

/// Names the calling thread (at most 15 bytes are kept), as `top -H` and
/// `/proc/PID/task/TID/comm` show it.
public func nameThisThread(_ name: String) {
    _ = tsys_name_thread(name)  // cosmetic: a refusal changes nothing else
}

/// Offers the calling thread's core to another thread that is ready to run; returns at
/// once if there is none (`sched_yield`, which cannot fail on Linux).
@inline(__always)
public func yieldTheCore() {
    _ = sched_yield()
}

/// Clocks the server reads, without Foundation.
public enum SystemClock {
    /// Milliseconds from a cheap monotonic clock (`CLOCK_MONOTONIC_COARSE`, a few ms of
    /// resolution).
    @inlinable @inline(__always)
    public static func monotonicMilliseconds() -> Int64 {
        var ts = timespec()
        // Cannot fail for a clock id the kernel has (Linux ≥ 2.6.32).
        _ = clock_gettime(CLOCK_MONOTONIC_COARSE, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Wall-clock seconds since 1970 (`CLOCK_REALTIME_COARSE`).
    public static func wallSeconds() -> Int64 {
        var ts = timespec()
        _ = clock_gettime(CLOCK_REALTIME_COARSE, &ts)
        return Int64(ts.tv_sec)
    }

    /// Wall-clock seconds since 1970 with their fraction (`CLOCK_REALTIME`): what
    /// `Date().timeIntervalSince1970` says, at a tenth of its instructions (a token's
    /// `exp` is checked on every request that carries one).
    public static func wallTime() -> Double {
        var ts = timespec()
        _ = clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
