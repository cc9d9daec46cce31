package io.gpusched.accounting;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.accounting.adversarial.accounting.AccountingNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The sweep mark (docs/ACCOUNTING.md, "The store"): the latest sweep the idle policy judged outlives a kill -9 of the
 * sampler's process, so a restarted policy continues from it and not from the last checkpoint marker (review55); a
 * mark torn, damaged, linked or not continuing the store's markers is not taken.
 */
class SweepMarkKillTest {
    private static final Instant T0 = AccountingNode.T0;

    @TempDir
    Path dir;

    @Test
    @Timeout(120)
    void theLatestSweepJudgedOutlivesAKillMinus9() throws Exception {
        Process child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), SweepMarkChild.class.getName(), dir.toString())
                .redirectErrorStream(true).redirectOutput(dir.resolve("child.log").toFile()).start();
        try {
            while (!Files.readString(dir.resolve("child.log")).contains("swept to")) {
                assertThat(child.isAlive()).as("child: %s", Files.readString(dir.resolve("child.log"))).isTrue();
                Thread.sleep(50);
            }
        } finally {
            child.destroyForcibly(); // SIGKILL: no close, no last marker
            child.waitFor(30, TimeUnit.SECONDS);
        }
        AccountingStore store = AccountingStore.at(dir);
        assertThat(store.recover(T0.atZone(java.time.ZoneOffset.UTC).toLocalDate()).judged())
                .as("the last marker was the first sweep's").contains(T0);
        assertThat(store.sweepMark()).as("the mark left by the killed process")
                .contains(new AccountingStore.SweepMark(T0.plusSeconds(50), Optional.of(T0)));
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(store.directory().resolve(
                AccountingStore.MARK)))).isEqualTo("rw-r--r--");
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults()
                .withCheckpoint(Duration.ofMinutes(1)))) {
            assertThat(node.sampler.idleWatch().judged()).as("the restarted policy's mark").contains(
                    T0.plusSeconds(50));
        }
    }

    /** A store whose markers end with another than the mark's base (its journals replaced): the mark is not taken. */
    @Test
    void aMarkThatDoesNotContinueTheMarkersIsNotTaken() throws IOException {
        AccountingStore store = AccountingStore.at(dir);
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            w.append(List.of(new AccountingRecord.Checkpoint(T0, List.of(), Optional.of(T0))));
            assertThat(w.mark(T0.plusSeconds(40))).isTrue();
            w.append(List.of(new AccountingRecord.Checkpoint(T0.plusSeconds(60), List.of(),
                    Optional.of(T0.plusSeconds(60)))));
            assertThat(w.mark(T0.plusSeconds(70))).isTrue();
        }
        assertThat(store.sweepMark()).contains(new AccountingStore.SweepMark(T0.plusSeconds(70),
                Optional.of(T0.plusSeconds(60))));
        // the journal holding the second marker lost (as if wiped): the markers end with T0, the mark's base is 60 s
        Path journal = store.journal(T0.atZone(java.time.ZoneOffset.UTC).toLocalDate());
        List<String> lines = Files.readAllLines(journal);
        Files.write(journal, lines.subList(0, 1));
        try (AccountingNode node = new AccountingNode(dir, AccountingSettings.defaults())) {
            assertThat(node.sampler.idleWatch().judged()).as("by the markers alone").contains(T0);
        }
    }

    @Test
    void aTornSlotLeavesTheOtherAndDamageLeavesNone() throws IOException {
        AccountingStore store = AccountingStore.at(dir);
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            assertThat(w.mark(T0)).as("no marker yet: nothing written, not a failure").isTrue();
            assertThat(Files.exists(store.directory().resolve(AccountingStore.MARK))).isFalse();
            w.append(List.of(new AccountingRecord.Checkpoint(T0, List.of())));
            w.mark(T0.plusSeconds(10));
            w.mark(T0.plusSeconds(20));
        }
        assertThat(store.sweepMark()).as("a marker without judged: the mark's base is none")
                .contains(new AccountingStore.SweepMark(T0.plusSeconds(20), Optional.empty()));
        Path mark = store.directory().resolve(AccountingStore.MARK);
        // the newest slot (sequence 2: the first) torn: the older one is read
        flip(mark, 20);
        assertThat(store.sweepMark()).contains(new AccountingStore.SweepMark(T0.plusSeconds(10), Optional.empty()));
        flip(mark, AccountingStore.MARK_SLOT + 20);
        assertThat(store.sweepMark()).as("both slots damaged").isEmpty();
        Files.write(mark, "short".getBytes(StandardCharsets.UTF_8));
        assertThat(store.sweepMark()).isEmpty();
    }

    @Test
    void aLinkedMarkIsNeitherReadNorWritten() throws IOException {
        AccountingStore store = AccountingStore.at(dir);
        Path elsewhere = Files.writeString(dir.resolve("victim"), "x".repeat(200));
        try (AccountingStore.Writer w = store.openWriter().orElseThrow()) {
            Files.createSymbolicLink(store.directory().resolve(AccountingStore.MARK), elsewhere);
            w.append(List.of(new AccountingRecord.Checkpoint(T0, List.of(), Optional.of(T0))));
            assertThat(w.mark(T0.plusSeconds(10))).as("a link is not followed").isFalse();
        }
        assertThat(Files.readString(elsewhere)).isEqualTo("x".repeat(200));
        assertThat(store.sweepMark()).isEmpty();
    }

    private static void flip(Path f, int at) throws IOException {
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(1);
            ch.read(b, at);
            b.put(0, (byte) (b.get(0) ^ 0x5a)).rewind();
            ch.write(b, at);
        }
    }
}
