package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link OutputRelay}'s clock: what a job's end waits for. Once the job's processes ended, the time its relay is at
 * work counts (a pipe some process outside the job holds, silent or writing without pause: review47); the time its
 * output waits for room at its client (a paused terminal that reads again later) never does, or the driver would let
 * the relay go with the job's own output still in the pipe (CI, stop 52: a client paused 15 s got 483,328 of the
 * 528,384 bytes its job wrote). A manual clock, a pipe and a sink that the test steps: nothing here depends on how fast
 * the machine is.
 */
@Timeout(value = 1, unit = TimeUnit.MINUTES)
class OutputRelayTest {
    /** A pipe: each read waits for the test's next chunk (an empty one: the end of the stream). */
    static final class StepPipe extends InputStream {
        final BlockingQueue<byte[]> chunks = new LinkedBlockingQueue<>();
        final Semaphore reading = new Semaphore(0);
        final AtomicLong read = new AtomicLong();
        final AtomicBoolean closed = new AtomicBoolean();

        @Override
        public int read() {
            throw new UnsupportedOperationException();
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            reading.release();
            byte[] c;
            try {
                c = chunks.take();
            } catch (InterruptedException e) {
                throw new java.io.InterruptedIOException("let go");
            }
            if (c.length == 0) {
                return -1;
            }
            int n = Math.min(len, c.length);
            System.arraycopy(c, 0, b, off, n);
            read.addAndGet(n);
            return n;
        }

        @Override
        public void close() {
            closed.set(true);
        }
    }

    /**
     * A client: each line waits until the test lets it through, as a wait for room at a paused client ({@link #paused},
     * counted by {@link #roomWaitNanos} on the test's clock) or as work (a slow encoding: not counted).
     */
    class StepSink implements JobSink {
        final Semaphore writing = new Semaphore(0);
        final Semaphore through = new Semaphore(0);
        final AtomicLong got = new AtomicLong();
        volatile boolean paused = true;
        private long waited;
        private long waitSince;

        @Override
        public synchronized long roomWaitNanos(boolean stderr) {
            return waited + (waitSince != 0 ? now.get() - waitSince : 0);
        }

        @Override
        public boolean gone() {
            return false;
        }

        @Override
        public void queued(int position) {
        }

        @Override
        public void started(Job job) {
        }

        @Override
        public void output(boolean stderr, byte[] b, int len) throws IOException {
            if (paused) {
                synchronized (this) {
                    waitSince = now.get();
                }
            }
            writing.release();
            try {
                through.acquire();
            } catch (InterruptedException e) {
                throw new java.io.InterruptedIOException("let go");
            } finally {
                synchronized (this) {
                    if (waitSince != 0) {
                        waited += now.get() - waitSince;
                        waitSince = 0;
                    }
                }
            }
            got.addAndGet(len);
        }

        @Override
        public void heartbeat() {
        }

        @Override
        public void exit(int code, String signal) {
        }
    }

    private final AtomicLong now = new AtomicLong(1_000_000_000L);

    private void advance(Duration d) {
        now.addAndGet(d.toNanos());
    }

    private static void await(Semaphore s) throws InterruptedException {
        assertThat(s.tryAcquire(30, TimeUnit.SECONDS)).as("the relay got there").isTrue();
    }

    @Test
    void timeSpentWaitingForAPausedClientNeverCountsOnlyReadsOfThePipeDo() throws Exception {
        StepPipe pipe = new StepPipe();
        StepSink sink = new StepSink();
        OutputRelay r = new OutputRelay("j1", pipe, false, sink, () -> {}, now::get);
        await(pipe.reading);
        pipe.chunks.add(new byte[100]);
        await(sink.writing); // the relay holds 100 bytes for a client that does not read
        advance(Duration.ofSeconds(30)); // while the job runs: nothing counts
        r.jobEnded(1 << 20);
        advance(Duration.ofMinutes(10)); // the client pauses for 10 minutes after the job's end
        assertThat(r.activeSinceEnd()).as("time in reads while the relay waited for its client").isZero();
        sink.through.release();
        await(pipe.reading); // the client read: the relay is back in a read of the pipe
        advance(Duration.ofSeconds(3));
        assertThat(r.activeSinceEnd()).as("a read under way for 3 s").isEqualTo(Duration.ofSeconds(3));
        pipe.chunks.add(new byte[50]);
        await(sink.writing);
        advance(Duration.ofMinutes(1));
        assertThat(r.activeSinceEnd()).as("3 s in reads, then a minute waiting for the client")
                .isEqualTo(Duration.ofSeconds(3));
        sink.through.release();
        await(pipe.reading);
        advance(Duration.ofSeconds(4));
        assertThat(r.activeSinceEnd()).isEqualTo(Duration.ofSeconds(7));
        pipe.chunks.add(new byte[0]);
        r.join(30_000);
        assertThat(r.isAlive()).isFalse();
        assertThat(sink.got.get()).isEqualTo(150);
        assertThat(pipe.closed.get()).as("the pipe is closed when the relay ends").isTrue();
    }

    @Test
    void timeAtWorkCountsWhateverItIsSpentOnSoAnOutsideWriterCannotKeepItGoing() throws Exception {
        StepPipe pipe = new StepPipe();
        StepSink sink = new StepSink();
        sink.paused = false; // a client that reads as fast as the relay gives: its output never waits for room
        OutputRelay r = new OutputRelay("j5", pipe, false, sink, () -> {}, now::get);
        await(pipe.reading);
        r.jobEnded(Long.MAX_VALUE); // root's job: no byte bound to stop it
        for (int i = 1; i <= 11; i++) { // a process outside the job writes without pause: every read returns at once
            pipe.chunks.add(new byte[16 * 1024]);
            await(sink.writing);
            advance(Duration.ofSeconds(1)); // the relay's own work (reading, encoding, queueing)
            sink.through.release();
            await(pipe.reading);
            assertThat(r.activeSinceEnd()).as("after %d chunks", i).isEqualTo(Duration.ofSeconds(i));
        }
        r.letGo();
        r.join(30_000);
        assertThat(r.isAlive()).isFalse();
    }

    @Test
    void aLetGoNeverInterruptsOutputUnderWayAndNothingIsReadAfterIt() throws Exception {
        StepPipe pipe = new StepPipe();
        StepSink sink = new StepSink();
        OutputRelay r = new OutputRelay("j6", pipe, false, sink, () -> {}, now::get);
        await(pipe.reading);
        r.jobEnded(1 << 20);
        pipe.chunks.add(new byte[100]);
        await(sink.writing); // giving its output (a detached job's file write, a line for the client)
        pipe.chunks.add(new byte[200]); // more in the pipe
        r.letGo();
        sink.through.release(); // the output under way completes: it was not interrupted
        r.join(30_000);
        assertThat(r.isAlive()).as("let go, it ended").isFalse();
        assertThat(sink.got.get()).as("the output under way went through, whole").isEqualTo(100);
        assertThat(pipe.read.get()).as("nothing read after the let-go").isEqualTo(100);
        assertThat(pipe.closed.get()).isTrue();
    }

    @Test
    void aReadUnderWayWhenTheJobEndsCountsFromTheEndOnly() throws Exception {
        StepPipe pipe = new StepPipe();
        OutputRelay r = new OutputRelay("j2", pipe, true, new StepSink(), () -> {}, now::get);
        await(pipe.reading);
        advance(Duration.ofHours(1)); // a silent job
        assertThat(r.activeSinceEnd()).isZero();
        r.jobEnded(1 << 20);
        advance(Duration.ofSeconds(2));
        assertThat(r.activeSinceEnd()).isEqualTo(Duration.ofSeconds(2));
        r.letGo(); // the read ends, and so does the relay
        r.join(30_000);
        assertThat(r.isAlive()).isFalse();
        assertThat(pipe.closed.get()).isTrue();
    }

    @Test
    void onceTheJobEndedItReadsNoMoreThanItsBoundThenClosesThePipe() throws Exception {
        StepPipe pipe = new StepPipe();
        StepSink sink = new StepSink();
        sink.through.release(1000);
        OutputRelay r = new OutputRelay("j3", pipe, false, sink, () -> {}, now::get);
        await(pipe.reading);
        pipe.chunks.add(new byte[4000]); // while it runs: unbounded
        await(pipe.reading);
        r.jobEnded(2500); // an outside process keeps writing: 1,000 bytes a read
        for (int i = 0; i < 3; i++) {
            pipe.chunks.add(new byte[1000]);
            if (i < 2) {
                await(pipe.reading);
            }
        }
        r.join(30_000);
        assertThat(r.isAlive()).as("its bound spent, the relay ended").isFalse();
        assertThat(pipe.read.get()).as("4,000 bytes before the end, then three reads reach the bound of 2,500")
                .isEqualTo(7000);
        assertThat(sink.got.get()).isEqualTo(7000);
        assertThat(pipe.closed.get()).isTrue();
    }

    @Test
    void aClientThatGoesIsToldOnceAndThePipeIsStillDrained() throws Exception {
        StepPipe pipe = new StepPipe();
        AtomicLong told = new AtomicLong();
        JobSink gone = new StepSink() {
            @Override
            public void output(boolean stderr, byte[] b, int len) throws IOException {
                throw new IOException("the client has gone");
            }
        };
        OutputRelay r = new OutputRelay("j4", pipe, false, gone, told::incrementAndGet, now::get);
        for (int i = 0; i < 3; i++) {
            await(pipe.reading);
            pipe.chunks.add(new byte[10]);
        }
        await(pipe.reading);
        pipe.chunks.add(new byte[0]);
        r.join(30_000);
        assertThat(r.isAlive()).isFalse();
        assertThat(pipe.read.get()).as("it kept reading after its client went").isEqualTo(30);
        assertThat(told.get()).as("the driver is told once").isEqualTo(1);
    }
}
