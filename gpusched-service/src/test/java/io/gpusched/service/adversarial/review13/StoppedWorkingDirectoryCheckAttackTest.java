package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.service.adversarial.review10.Clients;
import io.gpusched.testing.LocalUsers;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Before a job is allocated the service checks, as the caller, that its working directory can be entered
 * (JobLauncher.checkWorkingDirectory: setpriv, then {@code sh -c 'cd -- "$1"' gpusched-cwd-check DIR}), and gives the
 * check 30 s ("took over 30 s"). That shell runs as the caller, so the caller may stop it (SIGSTOP, from any of their
 * logins). The service reads the check's output to its end (readNBytes) before its 30 s wait begins: a stopped check
 * pins the service's request thread for as long as the caller likes, past the client's own end, with no bound. Here
 * alice stops her own checks (a loop of hers watching /proc) and sends job requests whose clients give up after 3 s;
 * the service is then given 50 s (the check's bound, now 10 s, and then some) to let go of every check thread.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class StoppedWorkingDirectoryCheckAttackTest {

    private static final String STOPPER = "while (1) { opendir(my $d, '/proc') or next; for my $p (readdir $d) {"
            + " next unless $p =~ /^\\d+$/; next if $p == $$; open(my $f, '<', \"/proc/$p/cmdline\") or next;"
            + " my $c = <$f>; close $f; kill 'STOP', $p if defined $c && index($c, 'gpusched-cwd-check') >= 0; }"
            + " closedir $d; }";

    @Test
    void aCheckItsCallerStoppedDoesNotPinAServiceThreadForever(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofSeconds(2))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            Path home = Clients.homeOf(tmp, alice);
            Process stopper = new ProcessBuilder("setpriv", "--reuid=" + alice.uid(), "--regid=" + alice.gid(),
                    "--init-groups", "--", "/usr/bin/perl", "-e", STOPPER).redirectErrorStream(true).redirectOutput(
                            ProcessBuilder.Redirect.DISCARD)
                    .start();
            List<Process> clients = new ArrayList<>();
            try {
                Path body = bed.dir.resolve("body-" + UUID.randomUUID() + ".json");
                Files.writeString(body, Clients.jobBody(home, List.of("/bin/true")), StandardCharsets.UTF_8);
                Files.setPosixFilePermissions(body, PosixFilePermissions.fromString("rw-r--r--"));
                for (int i = 0; i < 60 && stoppedChecks(alice).isEmpty(); i++) {
                    clients.add(new ProcessBuilder("setpriv", "--reuid=" + alice.uid(), "--regid=" + alice.gid(),
                            "--init-groups", "--", "curl", "-sN", "--max-time", "3", "--unix-socket", bed.socket
                                    .toString(),
                            "-X", "POST", "-H", "Content-Type: application/json",
                            "--data-binary", "@" + body, "http://localhost/api/v1/jobs").redirectErrorStream(true)
                            .redirectOutput(ProcessBuilder.Redirect.DISCARD).start());
                    Thread.sleep(150);
                }
                List<String> stopped = stoppedChecks(alice);
                org.junit.jupiter.api.Assumptions.assumeFalse(stopped.isEmpty(),
                        "alice's loop did not catch a check this time (a race): nothing to show");
                for (Process c : clients) {
                    c.waitFor(30, TimeUnit.SECONDS); // each client gave up (--max-time 3)
                }
                boolean letGo = Clients.await(() -> checkThreads().isEmpty(), 50);
                assertThat(letGo).as("service threads still in the working directory check 50 s after alice stopped"
                        + " her check process(es) %s and her clients gave up: %s", stopped, checkThreads()).isTrue();
            } finally {
                stopper.destroyForcibly();
                stopper.waitFor(30, TimeUnit.SECONDS);
                Clients.cleanUp(bed, alice, clients.toArray(new Process[0]));
                Clients.await(() -> checkThreads().isEmpty(), 30);
            }
        }
    }

    /** @return alice's processes that are checks and stopped (state T) */
    private static List<String> stoppedChecks(LocalUsers.User alice) throws Exception {
        List<String> out = new ArrayList<>();
        try (var ps = Files.list(Path.of("/proc"))) {
            for (Path p : ps.filter(x -> x.getFileName().toString().matches("[0-9]+")).toList()) {
                try {
                    String cmd = Files.readString(p.resolve("cmdline")).replace('\0', ' ');
                    String stat = Files.readString(p.resolve("stat"));
                    String state = stat.substring(stat.lastIndexOf(')') + 2).split(" ")[0];
                    if (cmd.contains("gpusched-cwd-check") && !cmd.contains("perl") && state.equals("T")) {
                        out.add(p.getFileName() + " " + cmd.strip());
                    }
                } catch (Exception gone) {
                    // exited
                }
            }
        }
        return out;
    }

    private static List<String> checkThreads() {
        List<String> r = new ArrayList<>();
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            if (Arrays.stream(e.getValue()).anyMatch(f -> f.getMethodName().equals("checkWorkingDirectory"))) {
                r.add(e.getKey().getName());
            }
        }
        return r;
    }
}
