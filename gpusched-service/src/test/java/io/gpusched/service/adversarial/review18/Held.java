package io.gpusched.service.adversarial.review18;

import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * Review18's tools: the node's ledger lock held from outside the service (another process of the node, as any engine
 * on the node takes it: an {@code fcntl} lock on {@code ledger.lock}), and clients run as a user that tell the status.
 */
final class Held {
    private Held() {
    }

    /** A process holding the ledger's lock until {@link #close}. */
    static final class LedgerLock implements AutoCloseable {
        private final Process p;

        LedgerLock(Path stateDir) throws IOException {
            p = new ProcessBuilder("/usr/bin/python3", "-c", "import fcntl, os, sys\n"
                    + "fd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.lockf(fd, fcntl.LOCK_EX)\n"
                    + "print('locked', flush=True)\nsys.stdin.read()\n", stateDir.resolve("ledger.lock").toString())
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            String l = r.readLine();
            if (!"locked".equals(l)) {
                p.destroyForcibly();
                throw new IOException("the ledger lock was not taken: " + l);
            }
        }

        @Override
        public void close() throws Exception {
            if (p.isAlive()) {
                p.getOutputStream().close();
                if (!p.waitFor(30, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                }
            }
        }
    }

    /** @return whether some thread of this JVM is in {@code cls.method} and waits (below it) on a future */
    static boolean waitingIn(String cls, String method) {
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            boolean in = false;
            boolean waits = false;
            for (StackTraceElement f : e.getValue()) {
                if (f.getClassName().equals(cls) && f.getMethodName().equals(method)) {
                    in = true;
                }
                if (!in && f.getClassName().startsWith("java.util.concurrent.CompletableFuture")) {
                    waits = true;
                }
            }
            if (in && waits) {
                return true;
            }
        }
        return false;
    }

    /**
     * Starts a user's curl posting {@code body} to {@code /api/v1/jobs}; its stdout ends with {@code STATUS:<code>}.
     */
    static Process post(ServiceBed bed, LocalUsers.User user, String body) throws IOException {
        Path f = bed.dir.resolve("body-" + UUID.randomUUID() + ".json");
        Files.writeString(f, body);
        Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-r--r--"));
        return new ProcessBuilder("setpriv", "--reuid=" + user.uid(), "--regid=" + user.gid(), "--init-groups", "--",
                "curl", "-sSN", "--max-time", "100", "--unix-socket", bed.socket.toString(), "-X", "POST", "-H",
                "Content-Type: application/json", "--data-binary", "@" + f, "-w", "\nSTATUS:%{http_code}\n",
                "http://localhost/api/v1/jobs").redirectErrorStream(true).start();
    }

    /** Starts a user's curl with {@code args} after the socket (its stdout ends with {@code STATUS:<code>}). */
    static Process curl(ServiceBed bed, LocalUsers.User user, String... args) throws IOException {
        List<String> cmd = new java.util.ArrayList<>(List.of("setpriv", "--reuid=" + user.uid(), "--regid=" + user
                .gid(), "--init-groups", "--", "curl", "-sS", "--max-time", "100", "-w", "\nSTATUS:%{http_code}\n",
                "--unix-socket", bed.socket.toString()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    /** @return all a process printed, once it ended (at most {@code seconds}; then what it printed so far) */
    static String output(Process p, int seconds) throws Exception {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        Thread t = new Thread(() -> {
            try (InputStream in = p.getInputStream()) {
                byte[] b = new byte[64 * 1024];
                int n;
                while ((n = in.read(b)) > 0) {
                    synchronized (got) {
                        got.write(b, 0, n);
                    }
                }
            } catch (IOException e) {
                // ended
            }
        });
        t.setDaemon(true);
        t.start();
        t.join(TimeUnit.SECONDS.toMillis(seconds));
        synchronized (got) {
            return got.toString(StandardCharsets.UTF_8);
        }
    }

    /** @return the id of the first job in state {@code state}, or null */
    static String jobIn(ServiceBed bed, String state) {
        for (Map<String, Object> j : bed.service.jobViews(ServiceBed.root())) {
            if (state.equals(j.get("state"))) {
                return (String) j.get("id");
            }
        }
        return null;
    }
}
