package io.gpusched.core.host;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.HolderProcess;
import io.gpusched.core.ProcessAttribution;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link AllocationAttribution#incarnation} on the kernel's procfs keeps a handle on each process it read: while the
 * handle reads, the start time stands without reading {@code stat} again; once the process is reaped the handle fails
 * and the pid reads as no process (or, taken again, as the new process's start time).
 */
class ProcessIncarnationHandleTest {

    private static Process sleeper() throws Exception {
        return new ProcessBuilder("sleep", "60").start();
    }

    @Test
    void aKeptHandleStandsWhileTheProcessRunsAndFailsOnceItIsReaped() throws Exception {
        assumeTrue(Files.isReadable(Path.of("/proc/self/oom_score_adj")), "skipped: no procfs at /proc");
        AllocationAttribution a = AllocationAttribution.host();
        Process p = sleeper();
        try {
            int pid = (int) p.pid();
            OptionalLong start = HolderProcess.startTime(pid, Path.of("/proc"));
            assertThat(start).isPresent();
            assertThat(a.incarnation(pid)).isEqualTo(start);
            assertThat(a.keptHandles()).isEqualTo(1);
            assertThat(a.incarnation(pid)).as("from the kept handle").isEqualTo(start);
            p.destroyForcibly();
            assertThat(p.waitFor(10, TimeUnit.SECONDS)).isTrue(); // reaped: the pid names no process now
            assertThat(a.incarnation(pid)).as("a reaped process's kept handle no longer reads")
                    .hasValue(ProcessAttribution.NO_PROCESS);
            assertThat(a.keptHandles()).isZero();
        } finally {
            p.destroyForcibly();
        }
    }

    @Test
    void noHandleIsKeptForAPidNoProcessHasAndAtMostMaxKept() throws Exception {
        assumeTrue(Files.isReadable(Path.of("/proc/self/oom_score_adj")), "skipped: no procfs at /proc");
        AllocationAttribution a = AllocationAttribution.host();
        assertThat(a.incarnation(Integer.MAX_VALUE)).hasValue(ProcessAttribution.NO_PROCESS);
        assertThat(a.keptHandles()).isZero();
        List<Process> ps = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                ps.add(sleeper());
            }
            for (Process p : ps) {
                assertThat(a.incarnation((int) p.pid())).isPresent();
            }
            assertThat(a.keptHandles()).isEqualTo(3);
        } finally {
            ps.forEach(Process::destroyForcibly);
        }
    }

    @Test
    void aFakeProcTreeIsReadEveryTime() throws Exception {
        Path proc = Files.createTempDirectory("gpusched-proc");
        try {
            Files.createDirectories(proc.resolve("4242"));
            Files.writeString(proc.resolve("4242/stat"), stat(4242, 1000));
            Files.writeString(proc.resolve("4242/oom_score_adj"), "0\n");
            AllocationAttribution a = AllocationAttribution.of(proc, proc.resolve("cg"));
            assertThat(a.incarnation(4242)).hasValue(1000);
            Files.writeString(proc.resolve("4242/stat"), stat(4242, 2000)); // the pid taken by another process
            assertThat(a.incarnation(4242)).hasValue(2000);
            assertThat(a.keptHandles()).isZero();
        } finally {
            try (var w = Files.walk(proc)) {
                w.sorted(java.util.Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
            }
        }
    }

    private static String stat(int pid, long start) {
        StringBuilder b = new StringBuilder(pid + " (sleep) S 1");
        for (int field = 5; field <= 21; field++) {
            b.append(" 0");
        }
        return b.append(' ').append(start).append(" 0 0\n").toString();
    }
}
