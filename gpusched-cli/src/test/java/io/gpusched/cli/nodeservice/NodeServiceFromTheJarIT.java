package io.gpusched.cli.nodeservice;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.testing.ForegroundSignals;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The node service as an admin deploys it: {@code java -jar gpusched.jar serve --socket ...} started as root (a child
 * process of the test), a real user's jobs sent with {@code curl --unix-socket} under {@code setpriv}. However a job
 * ends (its client killed, Ctrl-C, the service SIGKILLed and started again), its cgroup is gone (with the fence on
 * it) and its GPUs are released, as the ledger's file (read by {@link LedgerReader}) shows. Needs root, cgroup2 and
 * curl (skipped, saying so, without them).
 */
@Tag("cgroup")
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class NodeServiceFromTheJarIT {
    private Path base;
    private Path state;
    private Path socket;
    private Path jobParent;
    private Path config;
    private LocalUsers users;
    private JarService service;

    @BeforeEach
    void setUp() throws Exception {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv");
        assumeTrue(LocalUsers.run(List.of("sh", "-c", "command -v curl"), 10).exit() == 0, "needs curl");
        Path v2 = Path.of("/sys/fs/cgroup/unified");
        if (!Files.isRegularFile(v2.resolve("cgroup.procs"))) {
            v2 = Path.of("/sys/fs/cgroup");
        }
        assumeTrue(Files.isRegularFile(v2.resolve("cgroup.procs")) && Files.readString(Path.of("/proc/mounts"))
                .contains(" " + v2 + " cgroup2 "), "needs cgroup2");
        base = Files.createTempDirectory(Path.of("/tmp"), "gpusched-service-it");
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx--x--x"));
        state = base.resolve("state");
        socket = base.resolve("run").resolve("gpusched.sock");
        jobParent = v2.resolve("gsu-jobs-" + UUID.randomUUID().toString().substring(0, 8));
        config = base.resolve("gpusched.yaml");
        Files.writeString(config, "gpu:\n  service:\n    job_cgroup_parent: " + jobParent + "\n    kill_grace: 1s\n");
        users = LocalUsers.create();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (service != null) {
            service.close();
        }
        if (users != null) {
            users.close();
        }
        if (jobParent != null && Files.isDirectory(jobParent)) {
            try (var s = Files.list(jobParent)) {
                for (Path c : s.filter(Files::isDirectory).toList()) {
                    Files.writeString(c.resolve("cgroup.kill"), "1");
                    Thread.sleep(100);
                    Files.deleteIfExists(c);
                }
            }
            Files.deleteIfExists(jobParent);
        }
        if (base != null) {
            new ProcessBuilder("rm", "-rf", base.toString()).start().waitFor();
        }
    }

    private void startService(String... prefix) throws Exception {
        assertThat(JarService.jar()).as("built by package").isRegularFile();
        service = JarService.start(JarService.jar(), List.of(prefix), List.of("--simulate", "dgx1-v100",
                "--state-dir", state.toString(), "--config", config.toString(), "serve", "--listen", "127.0.0.1:0",
                "--socket", socket.toString()));
        startLines = service.awaitServing();
        assertThat(JarService.serving(startLines)).as("the service's start; it said " + startLines).isTrue();
        assertThat(startLines.get(startLines.size() - 1)).doesNotContain("jobs are off");
    }

    private List<String> startLines = List.of();

    private Process curl(User u, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("setpriv", "--reuid=" + u.uid(), "--regid=" + u.gid(),
                "--init-groups", "--"));
        cmd.addAll(ForegroundSignals.prefix()); // the test's Ctrl-C of curl: not ignored, as in a foreground job
        cmd.addAll(List.of("curl", "-sS", "-N", "--unix-socket", socket.toString()));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectErrorStream(true).start();
    }

    private String curlOut(User u, String... args) throws Exception {
        Process p = curl(u, args);
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return out;
    }

    private static final Pattern JOB_CGROUP = Pattern.compile("\"cgroup\":\"([^\"]+)\"");

    /** Starts an attached job that prints forever; @return the curl process and the job's cgroup */
    private Object[] attachedJob(User alice) throws Exception {
        Process c = curl(alice, "-X", "POST", "--data", "{\"flags\":[\"--gpu=2\"],\"argv\":[\"/bin/sh\",\"-c\","
                + "\"sleep 600 & while :; do echo tick; sleep 0.2; done\"],\"env\":{\"PATH\":\"/usr/bin:/bin\"},"
                + "\"cwd\":\"/\"}", "http://localhost/api/v1/jobs");
        BufferedReader r = new BufferedReader(new InputStreamReader(c.getInputStream(), StandardCharsets.UTF_8));
        String first = r.readLine();
        assertThat(first).as("the job's first event").contains("\"type\":\"started\"");
        Matcher m = JOB_CGROUP.matcher(first);
        assertThat(m.find()).as(first).isTrue();
        assertThat(r.readLine()).contains("\"type\":\"stdout\"");
        return new Object[]{c, Path.of(m.group(1))};
    }

    /** @return the command names of the cgroup's processes */
    private static List<String> commands(Path cgroup) throws IOException {
        List<String> out = new ArrayList<>();
        for (String pid : Files.readAllLines(cgroup.resolve("cgroup.procs"))) {
            try {
                out.add(Files.readString(Path.of("/proc", pid.strip(), "comm")).strip());
            } catch (IOException gone) {
                // ended between the list and the read
            }
        }
        return out;
    }

    private void awaitGoneAndReleased(Path cgroup) throws Exception {
        for (int i = 0; i < 600 && (Files.exists(cgroup) || !LedgerReader.read(state).live.isEmpty()); i++) {
            Thread.sleep(50);
        }
        assertThat(cgroup).as("the job's cgroup (and the fence on it)").doesNotExist();
        assertThat(LedgerReader.read(state).live).as("the job's GPUs were released").isEmpty();
        assertThat(LedgerReader.read(state).doubleGrants).isEmpty();
    }

    @Test
    void aClientKilledOrInterruptedEndsItsJobAndAKilledServiceIsCleanedUpWhenItStartsAgain() throws Exception {
        User alice = users.user("alice");
        startService();

        Object[] killed = attachedJob(alice);
        ((Process) killed[0]).destroyForcibly(); // SIGKILL of the client
        awaitGoneAndReleased((Path) killed[1]);

        Object[] interrupted = attachedJob(alice);
        assertThat(new ProcessBuilder("kill", "-INT", String.valueOf(((Process) interrupted[0]).pid())).start()
                .waitFor()).isZero(); // Ctrl-C of curl
        awaitGoneAndReleased((Path) interrupted[1]);

        String d = curlOut(alice, "-X", "POST", "--data", "{\"flags\":[\"--gpu=3\"],\"argv\":[\"/bin/sh\",\"-c\","
                + "\"sleep 600 & exec sleep 600\"],\"env\":{\"PATH\":\"/usr/bin:/bin\"},\"cwd\":\"/\",\"detach\":true}",
                "http://localhost/api/v1/jobs");
        Matcher m = JOB_CGROUP.matcher(d);
        assertThat(m.find()).as(d).isTrue();
        Path cgroup = Path.of(m.group(1));
        // the detached answer comes once the job started; its user-side shell reads its environment (cat) and execs
        // the job's shell, which forks the background sleep a moment later: two processes are not yet the two sleeps
        for (int i = 0; i < 600 && !commands(cgroup).equals(List.of("sleep", "sleep")); i++) {
            Thread.sleep(50);
        }
        assertThat(commands(cgroup)).as("the job's two sleeps").containsExactly("sleep", "sleep");
        assertThat(LedgerReader.read(state).live).hasSize(1);
        service.process.destroyForcibly().waitFor(60, TimeUnit.SECONDS); // SIGKILL of the service
        for (int i = 0; i < 200 && Files.readAllLines(cgroup.resolve("cgroup.procs")).size() > 1; i++) {
            Thread.sleep(50);
        }
        assertThat(Files.readAllLines(cgroup.resolve("cgroup.procs"))).as("the job's main process died with the"
                + " service (parent-death signal); what it forked is still in its fenced cgroup").hasSize(1);
        startService();
        // ended before the new service serves: by the ledger's reclaim of the dead service's allocation (the job
        // cgroup is recorded in it, so the reclaimer ends it first), or else by the service's own recovery
        assertThat(startLines.stream().anyMatch(l -> l.contains("on start, ended " + cgroup))
                || !Files.exists(cgroup)).as("the killed service's job is ended when it starts again: " + startLines)
                .isTrue();
        awaitGoneAndReleased(cgroup);

        // a clean stop ends a running job too
        String e = curlOut(alice, "-X", "POST", "--data", "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/sleep\","
                + "\"600\"],\"env\":{},\"cwd\":\"/\",\"detach\":true}", "http://localhost/api/v1/jobs");
        Matcher m2 = JOB_CGROUP.matcher(e);
        assertThat(m2.find()).as(e).isTrue();
        service.process.destroy(); // SIGTERM
        assertThat(service.process.waitFor(90, TimeUnit.SECONDS)).isTrue();
        assertThat(Path.of(m2.group(1))).doesNotExist();
        assertThat(LedgerReader.read(state).live).isEmpty();
        assertThat(socket).as("the socket is removed on a clean stop").doesNotExist();
    }

    /**
     * SIGTERM of {@code gpusched serve} as systemd stops it, with a client waiting in the queue and an attached job's
     * client reading (docs/SERVICE.md: the service stops before the console; the waiting client gets its {@code 503
     * SHUTTING_DOWN}, the attached client its {@code exit} line). Serve closed the console first once: both were cut
     * ("Empty reply from server", a stream without its last line).
     */
    @Test
    void sigtermAnswersTheWaitingClientAndEndsTheAttachedStreamWithItsExit() throws Exception {
        User alice = users.user("alice");
        User bob = users.user("bob");
        User carol = users.user("carol");
        startService();
        Object[] attached = attachedJob(alice); // 2 GPUs, printing
        assertThat(curlOut(carol, "-X", "POST", "--data", "{\"flags\":[\"--gpu=6\"]}",
                "http://localhost/api/v1/allocations")).contains("\"id\""); // the node is full
        Process waiting = curl(bob, "-w", "\n%{http_code}\n", "-X", "POST", "--data",
                "{\"flags\":[\"--gpu=1\"],\"wait\":\"5m\"}", "http://localhost/api/v1/allocations");
        String queue = "";
        for (int i = 0; i < 600 && !queue.contains(bob.name()); i++) {
            queue = curlOut(carol, "http://localhost/api/v1/queue");
            Thread.sleep(50);
        }
        assertThat(queue).as("bob's request waits").contains(bob.name());
        service.process.destroy(); // SIGTERM
        String bobGot = new String(waiting.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String aliceGot = new String(((Process) attached[0]).getInputStream().readAllBytes(),
                StandardCharsets.UTF_8);
        assertThat(service.process.waitFor(90, TimeUnit.SECONDS)).isTrue();
        assertThat(bobGot).as("what bob's waiting client got").contains("SHUTTING_DOWN").endsWith("503\n");
        String last = aliceGot.lines().map(String::strip).filter(l -> !l.isEmpty()).reduce((a, b) -> b).orElse("");
        assertThat(last).as("the last line of alice's attached stream").contains("\"type\":\"exit\"");
        assertThat((Path) attached[1]).doesNotExist();
    }

    /**
     * A service started with signals ignored, as {@code nohup gpusched serve &} does (here {@code env
     * --ignore-signal}, coreutils 8.31+): its jobs still start with every signal at its default, so a user's
     * {@code signal INT} reaches them. The job prints its own ignored-signal mask.
     */
    @Test
    void aServiceStartedWithSignalsIgnoredStartsJobsWithDefaultSignals() throws Exception {
        assumeTrue(LocalUsers.run(List.of("/usr/bin/env", "--ignore-signal=INT", "/bin/true"), 10).exit() == 0,
                "needs coreutils env --ignore-signal (8.31 and later) to start the service as nohup does");
        User alice = users.user("alice");
        startService("/usr/bin/env", "--ignore-signal=HUP,INT,QUIT,USR1", "--");
        String out = curlOut(alice, "-X", "POST", "--data", "{\"flags\":[\"--gpu=1\"],\"argv\":[\"/bin/grep\","
                + "\"^SigIgn:\",\"/proc/self/status\"],\"env\":{},\"cwd\":\"/\"}", "http://localhost/api/v1/jobs");
        StringBuilder printed = new StringBuilder(); // the job's stdout, from its events' base64 data
        Matcher data = Pattern.compile("\"type\":\"stdout\",\"data\":\"([A-Za-z0-9+/=]*)\"").matcher(out);
        while (data.find()) {
            printed.append(new String(Base64.getDecoder().decode(data.group(1)), StandardCharsets.UTF_8));
        }
        Matcher m = Pattern.compile("SigIgn:\\t([0-9a-f]{16})").matcher(printed);
        assertThat(m.find()).as("the job's output: " + out).isTrue();
        long ignored = Long.parseUnsignedLong(m.group(1), 16);
        for (int sig : new int[]{1, 2, 3, 10}) {
            assertThat(ignored & (1L << (sig - 1))).as("signal " + sig + " ignored in the job (mask " + m.group(1)
                    + ")").isZero();
        }
    }
}
