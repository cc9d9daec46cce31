package io.gpusched.yarn.adversarial.combinedcommit;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * "At most one forced append per {@code allocateDevices}" (the plug-in's Javadoc, docs/PERFORMANCE.md), observed by
 * the kernel rather than by the ledger's own counter: a child JVM drives the plug-in as YARN would (containers finish,
 * their GPUs are offered again, so calls release finished containers' records) under {@code strace -f}, and marks each
 * call by opening a path that does not exist. Between two marks: at most one {@code fsync}/{@code fdatasync}/
 * {@code msync}/{@code sync_file_range}, and exactly one for a call that granted (the grant must be durable before it
 * is acknowledged). Needs strace (installed by .ci/install-test-deps) and ptrace permission; skipped otherwise.
 */
@Tag("adversarial")
class ForcesFromOutsideAttackTest {

    private static final Pattern FORCE = Pattern.compile("\\b(fsync|fdatasync|msync|sync_file_range)\\(");

    @TempDir
    Path tmp;

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void eachCallForcesAtMostOnceAndEachGrantExactlyOnce() throws Exception {
        Path strace = null;
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
            if (Files.isExecutable(Path.of(dir, "strace"))) {
                strace = Path.of(dir, "strace");
                break;
            }
        }
        Assumptions.assumeTrue(strace != null, "strace is not installed (.ci/install-test-deps installs it)");
        Process probe = new ProcessBuilder(strace.toString(), "-f", "-e", "trace=none", "true")
                .redirectErrorStream(true).start();
        String probeOut = new String(probe.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        Assumptions.assumeTrue(probe.waitFor() == 0, "strace cannot trace here (ptrace refused?): " + probeOut);

        Path trace = tmp.resolve("strace.txt");
        String marker = tmp.resolve("no-such-mark").toString();
        int calls = 40;
        List<String> cmd = List.of(strace.toString(), "-f", "--seccomp-bpf", "-e",
                "trace=fsync,fdatasync,msync,sync_file_range,openat", "-o", trace.toString(),
                Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path"),
                YarnBooksChild.class.getName(), tmp.resolve("state").toString(), "2323", Integer.toString(calls),
                marker);
        Process child = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        Map<Long, Boolean> granted = new HashMap<>();
        int done = -1;
        try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(),
                StandardCharsets.UTF_8))) {
            for (String line; (line = out.readLine()) != null;) {
                if (line.startsWith("ACK ") || line.startsWith("DECLINED ")) {
                    String cid = line.split(" ")[1];
                    long n = Long.parseLong(cid.substring(cid.lastIndexOf('_') + 1));
                    granted.put(n, line.startsWith("ACK "));
                } else if (line.startsWith("DONE ")) {
                    done = Integer.parseInt(line.substring(5).trim());
                }
            }
        }
        assertThat(child.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(child.exitValue()).as("the traced child's exit").isZero();
        assertThat(done).as("grants the child made").isPositive();

        Pattern mark = Pattern.compile(Pattern.quote(marker) + "-(\\d+)\"");
        Map<Long, Integer> forces = new HashMap<>();
        Long current = null;
        List<String> strays = new ArrayList<>();
        for (String line : Files.readAllLines(trace, StandardCharsets.UTF_8)) {
            Matcher m = mark.matcher(line);
            if (line.contains("openat(") && m.find()) {
                current = Long.parseLong(m.group(1));
                forces.putIfAbsent(current, 0);
                continue;
            }
            if (FORCE.matcher(line).find() && !line.contains("resumed>")) {
                if (current == null) {
                    continue; // start-up: the ledger's creation
                }
                if (current == calls) {
                    strays.add(line); // after the last call returned: nothing should force
                } else {
                    forces.merge(current, 1, Integer::sum);
                }
            }
        }
        assertThat(granted).as("calls seen").isNotEmpty();
        int grants = 0;
        for (Map.Entry<Long, Boolean> e : granted.entrySet()) {
            int f = forces.getOrDefault(e.getKey(), -1);
            assertThat(f).as("call %d: marked in the trace", e.getKey()).isNotNegative();
            assertThat(f).as("call %d (%s): forces seen by the kernel", e.getKey(),
                    e.getValue() ? "granted" : "declined").isLessThanOrEqualTo(1);
            if (e.getValue()) {
                grants++;
                assertThat(f).as("call %d granted: its grant must be forced before it returns", e.getKey())
                        .isEqualTo(1);
            }
        }
        assertThat(grants).isEqualTo(done);
        assertThat(strays).as("forces after the last call").isEmpty();
    }
}
