package io.gpusched.service.adversarial.review47;

import io.gpusched.service.adversarial.review10.Clients;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** What review47's attacks share: a job's process found by its name, and a client's stream read as it comes. */
final class Review47 {
    private Review47() {
    }

    /** @return the pid of the first process named {@code comm} in the job cgroups under {@code parent} */
    static String awaitProcess(Path parent, String comm, int seconds) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < until) {
            for (String p : Clients.jobProcesses(parent)) {
                try {
                    if (Files.readString(Path.of("/proc", p, "comm")).strip().equals(comm)) {
                        return p;
                    }
                } catch (IOException gone) {
                    // not it
                }
            }
            Thread.sleep(10);
        }
        throw new AssertionError("no process " + comm + " in the job cgroups (" + Clients.jobProcesses(parent) + ")");
    }

    /**
     * Reads a client's stream on a thread of its own, 64 KiB at a time with {@code pauseMs} between reads (0: as
     * fast as it comes): counts its bytes, keeps the first {@code keep} of them, and notes the exit line.
     */
    static final class Stream implements Runnable {
        private final InputStream in;
        private final int keep;
        private final long pauseMs;
        private final ByteArrayOutputStream kept = new ByteArrayOutputStream();
        final AtomicLong bytes = new AtomicLong();
        volatile boolean exit;
        volatile boolean ended;
        final Thread thread;

        Stream(Process client, int keep, long pauseMs) {
            this.in = client.getInputStream();
            this.keep = keep;
            this.pauseMs = pauseMs;
            thread = new Thread(this, "review47-client-stream");
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void run() {
            byte[] buf = new byte[64 * 1024];
            String tail = "";
            try (in) {
                int n;
                while ((n = in.read(buf)) > 0) {
                    synchronized (kept) {
                        if (kept.size() < keep) {
                            kept.write(buf, 0, Math.min(n, keep - kept.size()));
                        }
                    }
                    String s = tail + new String(buf, 0, n, StandardCharsets.ISO_8859_1);
                    if (s.contains("\"type\":\"exit\"")) {
                        exit = true;
                    }
                    tail = s.substring(Math.max(0, s.length() - 32));
                    bytes.addAndGet(n);
                    if (pauseMs > 0) {
                        Thread.sleep(pauseMs);
                    }
                }
            } catch (IOException | InterruptedException e) {
                // the stream ended
            } finally {
                ended = true;
            }
        }

        byte[] kept() {
            synchronized (kept) {
                return kept.toByteArray();
            }
        }
    }
}
