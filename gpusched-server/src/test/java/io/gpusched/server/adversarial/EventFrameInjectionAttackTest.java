package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Owner, job and label text holding CR, LF, blank lines and "event:" lines, allocated over REST, must not split or
 * forge an event-stream frame: the stream is read with the SSE line rules (CR, LF and CRLF all end a line) and every
 * frame must be one of the server's event names with JSON data.
 */
@Tag("adversarial")
class EventFrameInjectionAttackTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path state;

    @Test
    void hostileTextNeverForgesAnEventFrame() throws Exception {
        SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                     .sampleInterval(Duration.ofMillis(200))
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start();
             Socket stream = new Socket(InetAddress.getLoopbackAddress(), c.address().getPort())) {
            RawHttp http = new RawHttp(c.address());
            stream.setSoTimeout(20_000);
            stream.getOutputStream().write("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            // registered before the allocation: the first state event has arrived
            InputStream in = stream.getInputStream();
            StringBuilder raw = new StringBuilder();
            byte[] buf = new byte[8192];
            while (!raw.toString().contains("event: state")) {
                int n = in.read(buf);
                assertThat(n).as("stream ended before its first state event: %s", raw).isPositive();
                raw.append(new String(buf, 0, n, StandardCharsets.UTF_8));
            }
            String evil = "x\r\n\r\nevent: pwned\r\ndata: {\"forged\":1}\r\n\r\n\revent: pwned\rdata: 2\r\r\n"
                    + "event: pwned\ndata: 3\n\n\u2028\u0085";
            String body = JSON.writeValueAsString(java.util.Map.of("flags", List.of("--gpu=1", "--owner=" + evil,
                    "--job=" + evil, "--label=k=" + evil)));
            RawHttp.Resp r = http.req("POST", "/api/v1/allocations", body,
                    "Authorization: Bearer " + c.token().value());
            if (r.status() != 201) {
                // the parser refused the text: then try it where the parser takes any text (job id only)
                body = JSON.writeValueAsString(java.util.Map.of("flags", List.of("--gpu=1", "--job=" + evil)));
                r = http.req("POST", "/api/v1/allocations", body, "Authorization: Bearer " + c.token().value());
            }
            System.out.println("review2: hostile owner/job/label POST -> " + r.status() + " " + r.body());
            boolean allocated = r.status() == 201;

            // read the stream (it is chunked: strip the chunk framing first) until an audit event arrived
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (System.nanoTime() < deadline) {
                int n = in.read(buf);
                if (n < 0) {
                    break;
                }
                raw.append(new String(buf, 0, n, StandardCharsets.UTF_8));
                String text = raw.toString();
                if (!allocated ? text.contains("event: tick") : text.contains("event: audit")
                        && text.indexOf("event: delta", text.indexOf("event: audit")) > 0) {
                    break;
                }
            }
            String all = raw.toString();
            int headEnd = all.indexOf("\r\n\r\n");
            assertThat(all).startsWith("HTTP/1.1 200");
            String events = dechunkPrefix(all.substring(headEnd + 4));
            if (allocated) {
                assertThat(events).contains("event: audit");
            }
            // SSE line rules: CRLF, LF or CR end a line; an empty line ends a frame
            List<List<String>> frames = new ArrayList<>();
            List<String> cur = new ArrayList<>();
            for (String line : events.split("\r\n|\n|\r", -1)) {
                if (line.isEmpty()) {
                    if (!cur.isEmpty()) {
                        frames.add(cur);
                    }
                    cur = new ArrayList<>();
                } else {
                    cur.add(line);
                }
            }
            assertThat(frames).isNotEmpty();
            for (List<String> f : frames) {
                String event = "message";
                StringBuilder data = new StringBuilder();
                for (String line : f) {
                    if (line.startsWith(":") || line.startsWith("id: ") || line.startsWith("retry: ")) {
                        continue;
                    }
                    if (line.startsWith("event: ")) {
                        event = line.substring(7);
                    } else if (line.startsWith("data: ")) {
                        data.append(data.length() == 0 ? "" : "\n").append(line.substring(6));
                    } else {
                        throw new AssertionError("a line no SSE field: [" + line + "] in " + f);
                    }
                }
                if (f.stream().allMatch(l -> l.startsWith(":") || l.startsWith("retry: "))) {
                    continue;
                }
                assertThat(event).as("frame %s", f).isIn(Set.of("state", "delta", "tick", "audit"));
                JSON.readTree(data.toString()); // every data is JSON
            }
        } finally {
            inv.close();
        }
    }

    /** removes chunk-size lines from a chunked body read so far (a last partial chunk is kept as it is) */
    static String dechunkPrefix(String s) {
        StringBuilder out = new StringBuilder();
        int i = 0;
        while (i < s.length()) {
            int eol = s.indexOf("\r\n", i);
            if (eol < 0) {
                break;
            }
            String size = s.substring(i, eol).trim();
            if (size.isEmpty()) { // the CRLF that ends a chunk's data, where the read split the chunk from it
                i = eol + 2;
                continue;
            }
            int n = Integer.parseInt(size, 16);
            if (n == 0) {
                break;
            }
            byte[] rest = s.substring(eol + 2).getBytes(StandardCharsets.UTF_8);
            int take = Math.min(n, rest.length);
            String chunk = new String(rest, 0, take, StandardCharsets.UTF_8);
            out.append(chunk);
            i = eol + 2 + chunk.length() + 2;
            if (take < n) {
                break;
            }
        }
        return out.toString();
    }
}
