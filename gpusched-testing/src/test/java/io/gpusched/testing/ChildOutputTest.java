package io.gpusched.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A killed child's output is read to its end: the lines it wrote before SIGKILL that the test had not read yet are
 * not dropped (as {@link Process#destroyForcibly()} drops them: it closes the parent's end of the pipe), and a line it
 * was killed while printing is not taken for a line.
 */
class ChildOutputTest {
    @TempDir
    Path tmp;

    @Test
    void linesWrittenBeforeTheKillAndNotReadYetAreRead() throws Exception {
        Path printed = tmp.resolve("printed");
        // 2000 lines (about 20 KB) wait in the pipe, unread, when the child is killed
        Process p = new ProcessBuilder("sh", "-c", "seq -f 'line %g' 1 2000; : > \"$0\"; exec sleep 600",
                printed.toString()).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!Files.exists(printed) && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(printed).as("the child printed its lines").exists();
            ChildOutput.kill(p);
            assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("killed").isTrue();
            assertThat(p.exitValue()).as("killed by SIGKILL").isEqualTo(128 + 9);
            ChildOutput out = ChildOutput.of(p); // begins to read only now, after the child died
            List<String> lines = out.awaitEnd(Duration.ofSeconds(60));
            assertThat(lines).hasSize(2000);
            for (int i = 0; i < lines.size(); i++) {
                assertThat(lines.get(i)).isEqualTo("line " + (i + 1));
            }
            assertThat(out.tornBytes()).isZero();
        } finally {
            p.destroyForcibly();
        }
    }

    @Test
    void aLineWithoutItsNewlineIsNotALine() throws Exception {
        Process p = new ProcessBuilder("sh", "-c", "printf 'ACK a-1 x\\nREL a-1 7\\nACK a-2 GPU-'").start();
        ChildOutput out = ChildOutput.of(p);
        assertThat(out.awaitEnd(Duration.ofSeconds(60))).containsExactly("ACK a-1 x", "REL a-1 7");
        assertThat(out.tornBytes()).isEqualTo("ACK a-2 GPU-".length());
    }

    @Test
    void aChildKilledWhileItPrintsLeavesEveryLineItPrinted() throws Exception {
        Process p = new ProcessBuilder("sh", "-c", "exec seq -f 'line %g' 1 100000000")
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        ChildOutput out = ChildOutput.of(p);
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (out.lines().size() < 1000 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            out.kill();
            List<String> lines = out.awaitEnd(Duration.ofSeconds(60));
            assertThat(lines.size()).as("lines read before and after the kill").isGreaterThanOrEqualTo(1000);
            for (int i = 0; i < lines.size(); i++) {
                assertThat(lines.get(i)).isEqualTo("line " + (i + 1));
            }
        } finally {
            p.destroyForcibly();
        }
    }
}
