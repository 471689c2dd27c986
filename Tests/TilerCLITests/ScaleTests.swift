import Foundation
import Testing
import TilerTestSupport

/// The scale-out deployment, small: `scripts/scale-test` starts the S3 test server, cuts
/// three images into it with tiler, starts two `tiler serve s3://…` replicas behind a real
/// HAProxy (with the deployment's own policy file, deploy/scale-out/haproxy/00-policy.cfg),
/// runs wrk through HAProxy and kills one replica with SIGKILL in the middle, then starts
/// it again. With the policy, no request fails and the restarted replica serves again;
/// without HAProxy's retries (the control), the same kill costs requests, so the zero is
/// the policy's doing and not a kill that missed every request.
@Suite struct ScaleTests {
    struct Report: Decodable {
        struct Kill: Decodable {
            let requestsAfterRestart: Int
        }
        struct Balancer: Decodable {
            let retries: Int
            let redispatches: Int
        }
        struct Replica: Decodable {
            let requests: Int
            /// What the replica's own /metrics says it answered, by status class ("2xx", …).
            let answeredByStatus: [String: Int]
        }
        let requests: Int
        let errors: Int
        let ok: Bool
        let kill: Kill
        let haproxy: Balancer
        let pyramids: [String]
        let perReplica: [String: Replica]
        /// The replica whose storage is down: not ready, so HAProxy sends it nothing.
        let dark: Replica
    }

    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Runs scripts/scale-test small (about 20 s: the S3 server, three small cuts, 7 s of load).
    static func scaleTest(_ extra: [String]) throws -> (ProcessOutput, Report?) {
        let script = packageRoot.appendingPathComponent("scripts/scale-test").path
        let result = try run(
            script,
            [
                "--replicas", "2", "--duration", "7", "--kill-at", "2", "--down", "1",
                "--connections", "8", "--size", "1200", "--no-install", "--json",
                "--tiler", try tilerBinary(),
            ] + extra)
        let line = result.stdout.split(separator: "\n").last.map(String.init) ?? ""
        return (result, try? JSONDecoder().decode(Report.self, from: Data(line.utf8)))
    }

    @Test func aKilledReplicaCostsNoRequestBehindHAProxy() throws {
        let (result, report) = try Self.scaleTest([])
        let seen = try #require(report, "no report: exit \(result.status), \(result.stderr)")
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(seen.ok && seen.errors == 0, "\(result.stdout)")
        #expect(seen.requests > 100, "\(result.stdout)")
        #expect(seen.kill.requestsAfterRestart > 0, "\(result.stdout)")
        // The replica whose storage is down was never given a request by HAProxy: it only
        // answered HAProxy's readiness checks, 503 each (its /metrics says so).
        #expect(seen.dark.requests == 0, "\(result.stdout)")
        #expect((seen.dark.answeredByStatus["5xx"] ?? 0) > 0 && seen.dark.answeredByStatus["2xx"] == nil, "\(seen.dark)")
        // Each replica's own count of its successes covers what HAProxy sent it since its
        // last start (r2 was never restarted: its count holds all of HAProxy's).
        let r2 = try #require(seen.perReplica["r2"])
        #expect((r2.answeredByStatus["2xx"] ?? 0) >= r2.requests, "\(r2)")
        // Three cut into the bucket, one packed into it from a folder.
        #expect(seen.pyramids == ["chart", "folder", "photo", "strip"])
    }

    @Test func withoutRetriesTheSameKillFailsRequests() throws {
        let (result, report) = try Self.scaleTest(["--no-retries", "--no-pack"])
        let seen = try #require(report, "no report: exit \(result.status), \(result.stderr)")
        #expect(result.status == 1, "\(result.stdout)\n\(result.stderr)")
        #expect(seen.errors > 0 && !seen.ok, "\(result.stdout)")
        #expect(seen.haproxy.retries == 0 && seen.haproxy.redispatches == 0)
    }
}
