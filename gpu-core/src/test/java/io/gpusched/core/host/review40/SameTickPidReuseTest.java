package io.gpusched.core.host.review40;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.HolderProcess;
import io.gpusched.core.host.AllocationAttribution;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Review 40: {@link AllocationAttribution#incarnation} must return "a token that names this process and no later one
 * given the same pid" (ProcessAttribution). The token is the kernel's start time, in clock ticks (10 ms at
 * USER_HZ=100): a process reaped and replaced under the same pid within the same tick gets the same token, so the
 * accounting meter (UsageMeter, review25) keeps charging the new process to the old one's allocation. The kept
 * {@code /proc/<pid>/oom_score_adj} handle of issue 34 does see the old process go (its read fails with ESRCH), yet
 * incarnation then re-reads {@code stat} and answers the very same token as before.
 *
 * <p>The reuse is forced through {@code /proc/sys/kernel/ns_last_pid} (root); a try counts only when the new process
 * really got the pid and really started in the same tick as the old one (both checked in {@code /proc}), so the
 * assertion does not depend on timing: it is skipped when no such try happened.
 */
class SameTickPidReuseTest {
    private static final Path NS_LAST_PID = Path.of("/proc/sys/kernel/ns_last_pid");

    @Test
    void aPidReusedWithinOneClockTickIsNotTheSameIncarnation() throws Exception {
        assumeTrue(Files.isReadable(Path.of("/proc/self/oom_score_adj")), "skipped: no procfs at /proc");
        assumeTrue(Files.isWritable(NS_LAST_PID) && "root".equals(System.getProperty("user.name")),
                "skipped: forcing a pid's reuse needs root (write /proc/sys/kernel/ns_last_pid)");
        assumeTrue(Files.isExecutable(Path.of("/bin/sleep")) || Files.isExecutable(Path.of("/usr/bin/sleep")),
                "skipped: no sleep binary");
        AllocationAttribution a = AllocationAttribution.host();
        for (int attempt = 0; attempt < 300; attempt++) {
            Process x = new ProcessBuilder("sleep", "60").start();
            Process y = null;
            try {
                int pid = (int) x.pid();
                OptionalLong first = a.incarnation(pid); // kept: an open handle on x
                x.destroyForcibly();
                assertThat(x.waitFor(10, TimeUnit.SECONDS)).isTrue(); // reaped: x is gone for good
                Files.writeString(NS_LAST_PID, Integer.toString(pid - 1));
                y = new ProcessBuilder("sleep", "60").start();
                if (y.pid() != pid || first.isEmpty()) {
                    continue; // another process took the pid first
                }
                OptionalLong yStart = HolderProcess.startTime(pid, Path.of("/proc"));
                if (yStart.isEmpty() || yStart.getAsLong() != first.getAsLong()) {
                    continue; // y started in a later tick: its start time differs, nothing to show
                }
                // x (reaped) and y (running now) are two processes with the same pid and the same start tick
                OptionalLong second = a.incarnation(pid);
                assertThat(second)
                        .as("pid %d: process %s was reaped and process %s took the pid in the same clock tick (both"
                                + " started at tick %d); incarnation(pid) must name y and not x, or a meter keeps"
                                + " charging y to x's allocation (review25), but it answered x's token again (the"
                                + " kept handle saw x reaped and the token was still reused)", pid, "x", "y",
                                first.getAsLong())
                        .isNotEqualTo(first);
                return;
            } finally {
                x.destroyForcibly();
                if (y != null) {
                    y.destroyForcibly();
                    y.waitFor(10, TimeUnit.SECONDS);
                }
            }
        }
        assumeTrue(false, "skipped: no pid was reused within one clock tick in 300 tries");
    }
}
