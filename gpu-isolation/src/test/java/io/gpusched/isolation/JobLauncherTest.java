package io.gpusched.isolation;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpusched.core.Allocation;
import io.gpusched.isolation.CgroupDeviceIsolator.Mechanism;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Jobs run as their user in a fenced cgroup ({@link JobLauncher}), on real cgroups (v2 and, where mounted, v1), fake
 * GPU nodes and real users made for the test. What the job could do is observed from inside the job (its own
 * {@code id}, {@code /proc/self/cgroup}, opens of every node), never asked of the launcher.
 */
@Tag("cgroup")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class JobLauncherTest {

    @ParameterizedTest
    @EnumSource(value = Mechanism.class, names = {"V1", "V2"})
    void aJobRunsAsItsUserInItsCgroupAndOpensExactlyItsGpus(Mechanism m, @TempDir Path tmp) throws Exception {
        try (JobBed jb = new JobBed(tmp, m)) {
            String team = jb.users.group("team");
            User alice = jb.users.user("alice", team);
            Allocation a = jb.gpus(1, 2);
            List<String> argv = new ArrayList<>(List.of("/bin/sh", "-c", "id -u; id -g; id -Gn; cat /proc/self/cgroup;"
                    + " pwd; shift 0; exec \"$@\"", "job"));
            argv.addAll(jb.probeArgv());
            JobBed.Result r = JobBed.finish(jb.launch(jb.spec(alice, argv, Map.of()), a));
            assertThat(r.code()).as(r.err()).isZero();
            List<String> lines = List.of(r.out().split("\n"));
            assertThat(lines.get(0)).isEqualTo(String.valueOf(alice.uid()));
            assertThat(lines.get(1)).isEqualTo(String.valueOf(alice.gid()));
            assertThat(lines.get(2).split(" ")).contains(alice.name(), team);
            String rel = "/" + CgroupBed.root(jb.isolator, m).relativize(jb.launcher.cgroupFor("t" + a.id()));
            assertThat(r.out()).contains(":" + rel + "\n");
            assertThat(r.out()).contains("\n/\n");
            Map<String, String> acc = JobBed.access(r.out());
            assertThat(acc).containsEntry("nvidia1", "rw").containsEntry("nvidia2", "rw")
                    .containsEntry("nvidiactl", "rw").containsEntry("nvidia0", "-").containsEntry("nvidia3", "-");
            assertThat(jb.launcher.cgroupFor("t" + a.id())).doesNotExist();
        }
    }

    /**
     * With a job group ({@code gpu.service.job_group}), a job has its user's own groups and that one, which its user
     * is no member of (so a login of the same user does not have it); a group that does not exist is refused by name.
     */
    @Test
    void aJobGroupIsAddedToTheUsersOwnGroups(@TempDir Path tmp) throws Exception {
        try (JobBed jb = new JobBed(tmp, Mechanism.V2)) {
            String team = jb.users.group("team");
            String jobs = jb.users.group("jobs");
            User alice = jb.users.user("alice", team);
            try (JobLauncher withGroup = JobLauncher.builder().isolator(jb.isolator).cgroupParent(jb.parent)
                    .jobGroup(jobs).build()) {
                Allocation a = jb.gpus(0);
                JobBed.Result r = JobBed.finish(withGroup.launch("t" + a.id(), jb.spec(alice, List.of("/usr/bin/id",
                        "-Gn"), Map.of()), a));
                assertThat(r.code()).as(r.err()).isZero();
                assertThat(r.out().strip().split(" ")).containsExactlyInAnyOrder(alice.name(), team, jobs);
            }
            LocalUsers.Result login = LocalUsers.run(List.of("/usr/bin/id", "-Gn", alice.name()), 10);
            assertThat(login.out().strip().split(" ")).doesNotContain(jobs);
            assertThatThrownBy(() -> JobLauncher.builder().isolator(jb.isolator).cgroupParent(jb.parent)
                    .jobGroup("gsu-no-such-group-x").build()).isInstanceOf(IsolationException.class)
                    .hasMessageContaining("gpu.service.job_group").hasMessageContaining("gsu-no-such-group-x");
        }
    }

    /**
     * A library preloaded through the job's environment records the effective uid of every process that loads it:
     * only the job's own processes do (the user's uid), never a root shell or setpriv on the way.
     */
    @Test
    void loaderVariablesReachOnlyTheUsersProcessesAndValuesArriveVerbatim(@TempDir Path tmp) throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/gcc")), "skipped: gcc is missing (it builds the marker)");
        try (JobBed jb = new JobBed(tmp, Mechanism.V2)) {
            User alice = jb.users.user("alice");
            Path so = marker(tmp);
            Path marks = Files.createDirectory(tmp.resolve("marks"));
            Files.setPosixFilePermissions(marks, PosixFilePermissions.fromString("rwxrwxrwx"));
            Path markFile = marks.resolve("uids");
            Map<String, String> env = new LinkedHashMap<>();
            env.put("LD_PRELOAD", so.toString());
            env.put("GSU_MARK", markFile.toString());
            env.put("GCONV_PATH", "/nonexistent");
            env.put("BASH_ENV", "/nonexistent/evil");
            env.put("ENV", "/nonexistent/evil");
            env.put("JAVA_TOOL_OPTIONS", "-Dx=y");
            String tricky = "it's $(id -u) `id` \"q\" \\ \n second line; $HOME ${PATH} * ?";
            env.put("TRICKY", tricky);
            env.put("IFS", "x");
            JobBed.Result r = JobBed.finish(jb.launch(jb.spec(alice, List.of("/usr/bin/printenv", "TRICKY"), env),
                    jb.gpus(0)));
            assertThat(r.code()).as(r.err()).isZero();
            assertThat(r.out()).isEqualTo(tricky + "\n");
            List<String> uids = Files.readAllLines(markFile);
            assertThat(uids).as("the marker ran in the job").isNotEmpty();
            assertThat(uids).as("no process loaded it as root").allMatch(u -> u.equals(String.valueOf(alice.uid())));
        }
    }

    private static Path marker(Path tmp) throws Exception {
        Path c = tmp.resolve("marker.c");
        Files.writeString(c, """
                #include <fcntl.h>
                #include <stdio.h>
                #include <stdlib.h>
                #include <unistd.h>
                __attribute__((constructor)) static void mark(void) {
                    const char *f = getenv("GSU_MARK");
                    if (!f) return;
                    int fd = open(f, O_WRONLY | O_APPEND | O_CREAT, 0666);
                    if (fd < 0) return;
                    char b[32];
                    int n = snprintf(b, sizeof b, "%d\\n", (int) geteuid());
                    if (write(fd, b, n) < 0) {}
                    close(fd);
                }
                """);
        Path so = tmp.resolve("marker.so");
        LocalUsers.Result built = LocalUsers.run(List.of("/usr/bin/gcc", "-shared", "-fPIC", "-o", so.toString(),
                c.toString()), 120);
        assertThat(built.exit()).as(built.err()).isZero();
        Files.setPosixFilePermissions(so, PosixFilePermissions.fromString("rwxr-xr-x"));
        return so;
    }

    @Test
    void aWorkingDirectoryTheUserCannotEnterIsRefusedWhateverItsSpelling(@TempDir Path tmp) throws Exception {
        try (JobBed jb = new JobBed(tmp, Mechanism.V2)) {
            User alice = jb.users.user("alice");
            Path secret = Files.createDirectory(tmp.resolve("root-only"));
            Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rwx------"));
            Path link = Files.createSymbolicLink(tmp.resolve("link"), secret);
            Path open = Files.createDirectory(tmp.resolve("open"));
            for (Path cwd : List.of(secret, link, Path.of(open + "/../" + secret.getFileName()))) {
                JobSpec s = new JobSpec(List.of("/bin/pwd"), Map.of("PATH", "/usr/bin:/bin"), cwd, alice.uid(),
                        alice.gid(), alice.name(), Optional.empty());
                assertThat(jb.launcher.checkWorkingDirectory(s)).as(cwd.toString()).get().asString()
                        .contains(alice.name()).contains("cannot enter the working directory");
                JobBed.Result r = JobBed.finish(jb.launch(s, jb.gpus(0)));
                assertThat(r.code()).isEqualTo(126);
                assertThat(r.out()).isEmpty();
                assertThat(r.err()).contains("cannot enter the working directory");
            }
            JobSpec ok = jb.spec(alice, List.of("/bin/pwd"), Map.of());
            assertThat(jb.launcher.checkWorkingDirectory(ok)).isEmpty();
        }
    }

    @Test
    void signalsReachEveryProcessAndTheCleanUpEndsWhatTheJobLeftBehind(@TempDir Path tmp) throws Exception {
        try (JobBed jb = new JobBed(tmp, Mechanism.V2)) {
            User alice = jb.users.user("alice");
            // the main shell traps INT; its background child would die of INT too
            LaunchedJob j = jb.launch(jb.spec(alice, List.of("/bin/sh", "-c", "trap 'echo got-int; exit 3' INT;"
                    + " setsid sleep 600 & echo ready; while :; do sleep 0.05; done"), Map.of()), jb.gpus(0));
            BufferedReader out = new BufferedReader(new InputStreamReader(j.stdout(), StandardCharsets.UTF_8));
            assertThat(out.readLine()).isEqualTo("ready");
            assertThat(CgroupProcesses.pids(j.cgroup()).size()).isGreaterThanOrEqualTo(2);
            assertThat(j.signal("SIGINT")).isGreaterThanOrEqualTo(1);
            assertThat(j.waitFor(Duration.ofSeconds(60))).contains(3);
            assertThat(out.readLine()).isEqualTo("got-int");
            assertThat(j.cleanUp()).isEmpty();
            assertThat(j.cgroup()).doesNotExist();
            assertThatThrownBy(() -> j.signal("STOP")).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("HUP, INT, QUIT, TERM, KILL, USR1, USR2");

            LaunchedJob stubborn = jb.launch(jb.spec(alice, List.of("/bin/sh", "-c", "trap '' TERM; echo ready;"
                    + " while :; do sleep 0.05; done"), Map.of()), jb.gpus(1));
            BufferedReader o2 = new BufferedReader(new InputStreamReader(stubborn.stdout(), StandardCharsets.UTF_8));
            assertThat(o2.readLine()).isEqualTo("ready");
            assertThat(stubborn.terminate(Duration.ofMillis(300))).as("it ignores TERM").isFalse();
            assertThat(stubborn.waitFor(Duration.ofSeconds(60))).contains(137);
            assertThat(LaunchedJob.signalOf(137)).contains("KILL");
            assertThat(stubborn.cgroup()).doesNotExist();
        }
    }

    /**
     * The service's JVM is SIGKILLed while its job runs: the job's main process dies with it (parent-death signal set
     * after the switch), and the process it forked, still in the fenced cgroup, is ended by the next launcher's
     * {@link JobLauncher#endLeftovers}.
     */
    @Test
    void aKilledServiceTakesItsJobWithItAndTheNextOneEndsWhatIsLeft(@TempDir Path tmp) throws Exception {
        try (JobBed jb = new JobBed(tmp, Mechanism.V2)) {
            User alice = jb.users.user("alice");
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            Process child = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
                    LauncherChild.class.getName(), jb.bed.dev.toString(), jb.bed.proc.toString(),
                    tmp.resolve("iso-state").toString(), jb.parent.toString(), String.valueOf(alice.uid()),
                    String.valueOf(alice.gid()), alice.name(), "k1-7").redirectErrorStream(true).start();
            try {
                killedService(jb, child);
            } finally {
                child.destroyForcibly(); // never left behind, whatever failed
            }
        }
    }

    private static void killedService(JobBed jb, Process child) throws Exception {
        {
            BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(),
                    StandardCharsets.UTF_8));
            String line;
            StringBuilder seen = new StringBuilder();
            while ((line = r.readLine()) != null && !line.startsWith("STARTED ")) {
                seen.append(line).append('\n');
            }
            assertThat(line).as(seen.toString()).isNotNull();
            long pid = Long.parseLong(line.split(" ")[1]);
            Path cgroup = Path.of(line.split(" ")[2]);
            // both sleeps running: the main process exec'd and the one its shell forked (two pids alone may be the
            // shell before it forked, with a process the start has not finished with)
            for (int i = 0; i < 6000 && !bothSleep(CgroupProcesses.pids(cgroup)); i++) { // up to 60 s: a loaded host
                Thread.sleep(10);
            }
            assertThat(CgroupProcesses.pids(cgroup)).hasSize(2);
            assertThat(bothSleep(CgroupProcesses.pids(cgroup))).as("the job's two sleeps run").isTrue();
            child.destroyForcibly().waitFor(60, TimeUnit.SECONDS);
            for (int i = 0; i < 6000 && ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false); i++) { // 60 s
                Thread.sleep(10);
            }
            assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false))
                    .as("the job's main process got its parent-death signal").isFalse();
            assertThat(CgroupProcesses.pids(cgroup)).as("what it forked is still in the cgroup").hasSize(1);
            assertThat(jb.launcher.endLeftovers(id -> false)).anyMatch(s -> s.startsWith("ended " + cgroup));
            assertThat(cgroup).doesNotExist();
        }
    }

    private static boolean bothSleep(List<Long> pids) {
        if (pids.size() != 2) {
            return false;
        }
        for (long p : pids) {
            try {
                if (!Files.readString(Path.of("/proc", Long.toString(p), "comm")).strip().equals("sleep")) {
                    return false;
                }
            } catch (IOException e) {
                return false;
            }
        }
        return true;
    }

    @Test
    void specsAreCheckedFieldByField() {
        Path cwd = Path.of("/");
        assertThatThrownBy(() -> new JobSpec(List.of(), Map.of(), cwd, 1, 1, "a", Optional.empty()))
                .hasMessageContaining("argv");
        assertThatThrownBy(() -> new JobSpec(List.of("x\0y"), Map.of(), cwd, 1, 1, "a", Optional.empty()))
                .hasMessageContaining("argv[0]").hasMessageContaining("NUL");
        assertThatThrownBy(() -> new JobSpec(List.of("x"), Map.of("A=B", "c"), cwd, 1, 1, "a",
                Optional.empty())).hasMessageContaining("not a variable name");
        assertThatThrownBy(() -> new JobSpec(List.of("x"), Map.of("A", "c\0"), cwd, 1, 1, "a",
                Optional.empty())).hasMessageContaining("env.A");
        assertThatThrownBy(() -> new JobSpec(List.of("x"), Map.of(), Path.of("rel"), 1, 1, "a",
                Optional.empty())).hasMessageContaining("cwd");
        assertThatThrownBy(() -> new JobSpec(List.of("x"), Map.of(), cwd, -1, 1, "a", Optional.empty()))
                .hasMessageContaining("uid");
        assertThatThrownBy(() -> new JobSpec(List.of("x"), Map.of(), cwd, 1, 1, "-rf", Optional.empty()))
                .hasMessageContaining("user");
        assertThat(JobLauncher.exports(Map.of("A", "it's"))).isEqualTo("export A='it'\\''s'\n");
    }
}
