package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.AccessDeniedException;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuAllocationException;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.ServiceSettings;
import io.gpusched.core.UserQuotas;
import io.gpusched.server.Caller;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.OwnThread;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Jobs run as their user through {@link NodeService}, on real cgroups (v2), fake GPU nodes and real users made for the
 * test; what the job could do is seen from inside it, and what was held from the ledger's file
 * ({@link LedgerReader}), not from the service.
 */
@Tag("cgroup")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class ServiceJobsTest {

    static GpuConfig config(List<Path> logins) {
        return GpuConfig.builder().users(UserQuotas.none()).service(ServiceSettings.defaults().withAdminGroup(
                "gsu-nonexistent").withLoginCgroups(logins).withKillGrace(Duration.ofMillis(500))).build();
    }

    /** The request of a job as the client sends it. */
    static Requests.Job job(List<String> argv, String cwd, boolean detach, String... flags) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("PATH", "/usr/bin:/bin");
        env.put("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7");
        StringBuilder b = new StringBuilder("{\"flags\":[");
        for (int i = 0; i < flags.length; i++) {
            b.append(i > 0 ? "," : "").append('"').append(flags[i]).append('"');
        }
        b.append("],\"argv\":").append(ServiceExchanges.json(argv)).append(",\"env\":").append(ServiceExchanges.json(
                env)).append(",\"cwd\":").append(ServiceExchanges.json(cwd)).append(",\"detach\":").append(detach)
                .append('}');
        return Requests.job(b.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** Runs an attached job to its end, as the HTTP route does. */
    static CompletableFuture<Job> attached(NodeService s, Caller c, Requests.Job r, RecordingSink sink) {
        Job j = s.prepareJob(c, r);
        return OwnThread.supply(() -> {
            try {
                Optional<Allocation> a = s.jobs().allocate(j, sink);
                a.ifPresent(x -> {
                    try {
                        s.jobs().run(j, x, sink);
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                });
                return j;
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    private static String probe(ServiceBed bed) {
        StringBuilder p = new StringBuilder("id -u; echo CVD=$CUDA_VISIBLE_DEVICES; for f in");
        for (int i = 0; i < 8; i++) {
            p.append(' ').append(bed.dev.resolve("nvidia" + i));
        }
        p.append(' ').append(bed.dev.resolve("nvidiactl"));
        p.append("; do if err=$( (: < \"$f\") 2>&1); then echo \"${f##*/} open\"; else case \"$err\" in"
                + " *'not permitted'*) echo \"${f##*/} EPERM\";; *) echo \"${f##*/} open\";; esac; fi; done");
        return p.toString();
    }

    @Test
    void alicesJobRunsAsAliceOpensOnlyItsGpusAndEverythingIsUndone(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            NodeService s = bed.start();
            RecordingSink sink = new RecordingSink();
            Job j = attached(s, ServiceBed.caller(alice, false), job(List.of("/bin/sh", "-c", probe(bed)
                    + "; echo to-stderr >&2; exit 3"), home(tmp, alice), false, "--devices=2,5"), sink)
                    .get(2, TimeUnit.MINUTES);
            assertThat(sink.code).as(sink.stderr()).isEqualTo(3);
            String out = sink.stdout();
            assertThat(out).startsWith(alice.uid() + "\n");
            assertThat(out).doesNotContain("CVD=0,1,2,3,4,5,6,7");
            for (int i = 0; i < 8; i++) {
                assertThat(out).contains("nvidia" + i + (i == 2 || i == 5 ? " open" : " EPERM"));
            }
            assertThat(out).contains("nvidiactl open");
            assertThat(sink.stderr()).isEqualTo("to-stderr\n");
            assertThat(j.state).isEqualTo(Job.State.EXITED);
            assertThat(j.cgroup()).doesNotExist();
            assertThat(bed.scheduler.allocations()).isEmpty();
            LedgerReader r = LedgerReader.read(bed.state);
            assertThat(r.live).isEmpty();
            assertThat(r.peakGpusByOwner).containsEntry("uid:" + alice.uid(), 2);
            String audit = Files.readString(bed.state.resolve("audit.log"));
            assertThat(audit).contains("\"action\":\"job.start\"").contains("\"action\":\"job.end\"")
                    .contains("\"uid\":" + alice.uid());
        }
    }

    /**
     * A job that does not wait takes its place in the fair queue as a plain allocation does: with alice's whole-node
     * request waiting at the head, bob's one-GPU job is refused (naming alice's request), not started on the GPUs she
     * is owed.
     */
    @Test
    void aJobThatDoesNotWaitIsNotStartedOnGpusAWaitingRequestIsOwed(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User bob = bed.accounts.user("bob");
            NodeService s = bed.start();
            Caller carol = ServiceBed.caller("gsu-carol", 61001, false);
            Caller alice = ServiceBed.caller("gsu-alice", 61002, false);
            Allocation held = s.allocate(carol, GpuRequests.fromCliFlags(List.of("--gpu=4")), Optional.empty(),
                    () -> false);
            CompletableFuture<Allocation> whole = OwnThread.supply(() -> {
                try {
                    return s.allocate(alice, GpuRequests.fromCliFlags(List.of("--gpu=8")), Optional.of(Duration
                            .ofMinutes(1)), () -> false);
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            NodeServiceTest.waitForQueue(s, 1);
            Job j = s.prepareJob(ServiceBed.caller(bob, false), job(List.of("/bin/true"), home(tmp, bob), true,
                    "--gpu=1"));
            assertThatThrownBy(() -> s.jobs().detach(j)).isInstanceOf(GpuAllocationException.class)
                    .hasMessageContaining("owed to the node service's queue").hasMessageContaining("gsu-alice");
            assertThat(j.state).isEqualTo(Job.State.FAILED);
            assertThat(j.output.orElseThrow()).as("the refused job's output file is removed").doesNotExist();
            s.scheduler().release(held.id());
            s.scheduler().release(whole.get(1, TimeUnit.MINUTES).id());
        }
    }

    /**
     * Ended jobs are kept per user, those that ran apart from those that never started: bob's own flood of refused
     * jobs keeps at most {@link Jobs#KEEP_NEVER_STARTED} of them and does not push out his job that ran.
     */
    @Test
    void refusedJobsAreKeptApartAndDoNotPushOutAJobThatRan(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User bob = bed.accounts.user("bob");
            NodeService s = bed.start();
            Caller b = ServiceBed.caller(bob, false);
            Job ran = s.prepareJob(b, job(List.of("/bin/sh", "-c", "echo ran"), home(tmp, bob), true, "--gpu=1"));
            s.jobs().detach(ran);
            NodeService.awaitEnd(ran, Duration.ofMinutes(1));
            for (int i = 0; i <= Jobs.KEEP_ENDED; i++) {
                Job r = s.prepareJob(b, job(List.of("/bin/true"), "/", true, "--gpu=9"));
                assertThatThrownBy(() -> s.jobs().detach(r)).isInstanceOf(GpuAllocationException.class);
            }
            assertThat(s.jobs().get(ran.id).state).isEqualTo(Job.State.EXITED);
            ByteArrayOutputStream logs = new ByteArrayOutputStream();
            s.jobs().logs(b, ran.id, false, logs);
            assertThat(logs.toString(StandardCharsets.UTF_8)).isEqualTo("ran\n");
            // the newest refusal ended after the last trim (a trim comes with each new job)
            assertThat(s.jobs().all().stream().filter(j -> j.startedAt == null).count())
                    .isLessThanOrEqualTo(Jobs.KEEP_NEVER_STARTED + 1);
        }
    }

    @Test
    void aDetachedJobsOutputIsItsUsersAndOnlyItsOwnerOrAnAdminReadsOrCancelsIt(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            LocalUsers.User bob = bed.accounts.user("bob");
            NodeService s = bed.start();
            Caller a = ServiceBed.caller(alice, false);
            Caller b = ServiceBed.caller(bob, false);
            Job j = s.prepareJob(a, job(List.of("/bin/sh", "-c", "echo started; sleep 600"), home(tmp, alice),
                    true, "--gpu=1"));
            s.jobs().detach(j);
            assertThat(j.state).isEqualTo(Job.State.RUNNING);
            Path out = j.output.orElseThrow();
            for (int i = 0; i < 6000 && Files.size(out) == 0; i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            // the service's own file: its user reads it through the service, and cannot write it past the cap
            assertThat(Files.getAttribute(out, "unix:uid", LinkOption.NOFOLLOW_LINKS)).isEqualTo(0);
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(out))).isEqualTo("rw-------");
            ByteArrayOutputStream logs = new ByteArrayOutputStream();
            s.jobs().logs(a, j.id, false, logs);
            assertThat(logs.toString(StandardCharsets.UTF_8)).isEqualTo("started\n");
            assertThat(LocalUsers.runAs(alice, List.of("/bin/sh", "-c", "echo more >> \"$1\"", "sh", out.toString()),
                    30).exit()).as("alice cannot append to her job's output file").isNotZero();
            assertThat(LocalUsers.runAs(bob, List.of("/bin/cat", out.toString()), 30).exit())
                    .as("bob cannot read alice's output").isNotZero();

            assertThatThrownBy(() -> s.checkLogs(b, j.id)).isInstanceOf(AccessDeniedException.class);
            assertThatThrownBy(() -> s.cancelJob(b, j.id)).isInstanceOf(AccessDeniedException.class)
                    .hasMessageContaining("it is " + alice.name() + "'s");
            assertThatThrownBy(() -> s.signalJob(b, j.id, "TERM")).isInstanceOf(AccessDeniedException.class);
            assertThatThrownBy(() -> s.release(b, j.allocation.id())).isInstanceOf(AccessDeniedException.class);
            Map<String, Object> seenByBob = j.view(b);
            assertThat(seenByBob.get("argv")).isNull();
            assertThat(seenByBob.get("owner")).isEqualTo(alice.name());
            assertThat(j.view(a).get("argv")).isEqualTo(List.of("/bin/sh", "-c", "echo started; sleep 600"));

            Job cancelled = s.cancelJob(ServiceBed.root(), j.id);
            assertThat(cancelled.state).isEqualTo(Job.State.CANCELLED);
            assertThat(j.cgroup()).doesNotExist();
            for (int i = 0; i < 6000 && !bed.scheduler.allocations().isEmpty(); i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            assertThat(LedgerReader.read(bed.state).live).isEmpty();
        }
    }

    @Test
    void aWorkingDirectoryOnlyRootCanReadIsRefusedBeforeAnythingIsAllocated(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            NodeService s = bed.start();
            Path secret = Files.createDirectory(tmp.resolve("secret"));
            Files.setPosixFilePermissions(secret, PosixFilePermissions.fromString("rwx------"));
            Path link = Files.createSymbolicLink(tmp.resolve("innocent"), secret);
            for (String cwd : List.of(secret.toString(), link.toString(), home(tmp, alice) + "/../"
                    + secret.getFileName())) {
                assertThatThrownBy(() -> s.prepareJob(ServiceBed.caller(alice, false), job(List.of("/bin/pwd"), cwd,
                        false))).as(cwd).isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining("cannot enter the working directory");
            }
            assertThat(LedgerReader.read(bed.state).live).isEmpty();
            assertThat(Files.exists(bed.state.resolve("ledger")) ? LedgerReader.read(bed.state).ended : List.of())
                    .isEmpty();
        }
    }

    @Test
    void aClientThatGoesAwayOrAJobKilledByASignalEndsWithEverythingUndone(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            NodeService s = bed.start();
            Caller a = ServiceBed.caller(alice, false);
            RecordingSink leaving = new RecordingSink();
            CompletableFuture<Job> f = attached(s, a, job(List.of("/bin/sh", "-c", "trap '' TERM; sleep 600 & while"
                    + " :; do echo tick; sleep 0.2; done"), "/", false, "--gpu=2"), leaving);
            for (int i = 0; i < 6000 && !leaving.stdout().contains("tick"); i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            leaving.leave(); // like a client killed with SIGKILL: its next write fails
            Job gone = f.get(2, TimeUnit.MINUTES);
            assertThat(gone.state).isEqualTo(Job.State.CANCELLED);
            assertThat(gone.cancelled).contains("client went away");
            assertThat(gone.cgroup()).doesNotExist();

            RecordingSink sink = new RecordingSink();
            CompletableFuture<Job> k = attached(s, a, job(List.of("/bin/sh", "-c", "echo $$; exec sleep 600"), "/",
                    false, "--gpu=1"), sink);
            for (int i = 0; i < 6000 && sink.stdout().isEmpty(); i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            long pid = Long.parseLong(sink.stdout().strip());
            ProcessHandle.of(pid).orElseThrow().destroyForcibly();
            Job killed = k.get(2, TimeUnit.MINUTES);
            assertThat(killed.state).isEqualTo(Job.State.KILLED);
            assertThat(killed.signal).isEqualTo("KILL");
            assertThat(sink.code).isEqualTo(137);
            assertThat(killed.cgroup()).doesNotExist();
            assertThat(bed.scheduler.allocations()).isEmpty();
            assertThat(LedgerReader.read(bed.state).live).isEmpty();
        }
    }

    /**
     * A service that is not stopped (as if killed) leaves its job running in its cgroup; the next service on the node
     * ends it and releases its allocation before serving anyone.
     */
    @Test
    void theNextServiceEndsTheJobsOfOneThatDiedAndReleasesThem(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            NodeService first = bed.start();
            RecordingSink sink = new RecordingSink();
            attached(first, ServiceBed.caller(alice, false), job(List.of("/bin/sh", "-c", "sleep 600 & echo up;"
                    + " exec sleep 600"), "/", false, "--gpu=3"), sink);
            for (int i = 0; i < 6000 && !sink.stdout().contains("up"); i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            Job j = first.jobs().all().get(0);
            assertThat(j.cgroup()).exists();
            String id = j.allocation.id();
            // named after its allocation and recorded in the node ledger, so any reclaimer ends the job first
            assertThat(j.cgroup().getFileName().toString()).isEqualTo("job-" + id);
            assertThat(bed.scheduler.allocation(id).orElseThrow().request().jobCgroup())
                    .contains(j.cgroup().toString());
            // the first service is left as a killed one would be: not closed (its lock dropped, as the kernel does)
            first.dropInstanceLockAsIfKilled();
            NodeService second = NodeService.builder().scheduler(bed.scheduler).config(bed.config).stateDir(bed.state)
                    .jobs(bed.launcher, null).isolator(bed.isolator).build().start();
            try {
                assertThat(second.recovered()).anyMatch(l -> l.startsWith("ended " + j.cgroup()));
                assertThat(j.cgroup()).doesNotExist();
                // released by the second, or (in this JVM, where the first still runs) by the first on its job's end
                for (int i = 0; i < 6000 && LedgerReader.read(bed.state).live.containsKey(id); i++) { // up to 60 s
                    Thread.sleep(10);
                }
                assertThat(LedgerReader.read(bed.state).live).doesNotContainKey(id);
            } finally {
                second.close();
            }
        }
    }

    /**
     * Logins fenced: a process in the login cgroup gets EPERM on every GPU node and the control node while a job opens
     * its own; a restart replaces the fence (a clean stop of the second leaves nothing of the first); a restart with
     * the setting off takes a fence left by a killed run off; the setting off changes nothing.
     */
    @Test
    void aLoginCgroupOpensNoGpuWhileJobsOpenTheirOwnAndARestartReplacesTheFence(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            Path login = bed.cgroup("login");
            assertThat(bed.loginProbe(login)).as("before: the login opens every node").doesNotContain("EPERM");
            GpuConfig fenced = config(List.of(login));
            NodeService first = NodeService.builder().scheduler(bed.scheduler).config(fenced).stateDir(bed.state)
                    .jobs(bed.launcher, null).isolator(bed.isolator).build().start();
            assertThat(bed.loginProbe(login)).contains("nvidia0 EPERM").contains("nvidia7 EPERM")
                    .contains("nvidiactl EPERM").doesNotContain(" open");
            RecordingSink sink = new RecordingSink();
            attached(first, ServiceBed.caller(alice, false), job(List.of("/bin/sh", "-c", probe(bed)), "/", false,
                    "--devices=4"), sink).get(2, TimeUnit.MINUTES);
            assertThat(sink.stdout()).contains("nvidia4 open").contains("nvidia3 EPERM").contains("nvidiactl open");
            // the first is "killed" (not stopped): the fence stays; the next replaces it
            first.dropInstanceLockAsIfKilled();
            NodeService second = NodeService.builder().scheduler(bed.scheduler).config(fenced).stateDir(bed.state)
                    .jobs(bed.launcher, null).isolator(bed.isolator).build().start();
            assertThat(bed.loginProbe(login)).doesNotContain(" open");
            second.close();
            assertThat(bed.loginProbe(login)).as("after a clean stop of the second, nothing is left of either")
                    .doesNotContain("EPERM");
            NodeService third = NodeService.builder().scheduler(bed.scheduler).config(fenced).stateDir(bed.state)
                    .jobs(bed.launcher, null).isolator(bed.isolator).build().start();
            assertThat(bed.loginProbe(login)).doesNotContain(" open");
            // killed again; now started with the setting off: the old fence comes off
            third.dropInstanceLockAsIfKilled();
            NodeService off = NodeService.builder().scheduler(bed.scheduler).config(config(List.of())).stateDir(
                    bed.state).jobs(bed.launcher, null).isolator(bed.isolator).build().start();
            assertThat(bed.loginProbe(login)).doesNotContain("EPERM");
            off.close();
            assertThat(third).isNotNull();
        }
    }

    /**
     * A clean stop ({@code systemctl stop}: the command closes the service, then the JVM exits) returns only once
     * every running job's cgroup is gone and its GPUs are released: the ledger, read by the independent reader the
     * moment {@code close()} returns, holds nothing. (A job's end was signalled before its clean-up and release, and
     * the stop waited for that signal alone: the JVM could exit with the job's GPUs still held.)
     */
    @Test
    void aCleanStopReturnsOnlyOnceEveryJobsGpusAreReleased(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            LocalUsers.User alice = bed.accounts.user("alice");
            NodeService s = bed.start();
            List<RecordingSink> sinks = new ArrayList<>();
            for (int k = 0; k < 3; k++) {
                RecordingSink sink = new RecordingSink();
                sinks.add(sink);
                attached(s, ServiceBed.caller(alice, false), job(List.of("/bin/sh", "-c", "echo up; exec sleep 600"),
                        "/", false, "--gpu=2"), sink);
            }
            for (int i = 0; i < 1000 && sinks.stream().anyMatch(x -> !x.stdout().contains("up")); i++) {
                Thread.sleep(10);
            }
            List<Path> cgroups = s.jobs().all().stream().map(Job::cgroup).toList();
            assertThat(cgroups).hasSize(3);
            assertThat(LedgerReader.read(bed.state).live).hasSize(3);
            s.close();
            bed.service = null;
            assertThat(LedgerReader.read(bed.state).live).as("held when close() returned").isEmpty();
            assertThat(cgroups).allSatisfy(cg -> assertThat(cg).doesNotExist());
        }
    }

    @Test
    void aJobCgroupParentInsideALoginCgroupIsRefused(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs()) {
            Path login = bed.jobParent.getParent();
            assertThatThrownBy(() -> NodeService.builder().scheduler(bed.scheduler).config(config(List.of(login)))
                    .stateDir(bed.state).jobs(bed.launcher, null).isolator(bed.isolator).build())
                    .hasMessageContaining("are nested");
        }
    }

    /**
     * A detached job's state turns when its processes end; its output file is final a moment later (the relays' last
     * bytes; the line saying what a full disk dropped, written when the file closes). Its logs, read the moment it
     * ended, or followed to its end, hold all of it: here the note of the lines a full disk refused at its end.
     */
    @Test
    void theLogsOfAJobReadTheMomentItEndedHoldItsLastWord(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, config(List.of())).jobs();
             FullDisk disk = FullDisk.over(bed.state.resolve("jobs"), "gsu-jobs-logs")) {
            LocalUsers.User alice = bed.accounts.user("alice");
            NodeService s = bed.start();
            Caller a = ServiceBed.caller(alice, false);
            String home = home(tmp, alice);
            disk.fill();
            // twenty lines onto the full disk, a pause for the relay to meet the last, then it waits to be ended
            Job j = s.prepareJob(a, job(List.of("/bin/sh", "-c", "i=0; while [ $i -lt 20 ]; do i=$((i+1));"
                    + " echo line $i; sleep 0.05; done; sleep 0.5; echo > printed; while [ ! -e end ]; do sleep 0.05;"
                    + " done"), home, true, "--gpu=1"));
            s.jobs().detach(j);
            ByteArrayOutputStream followed = new ByteArrayOutputStream();
            CompletableFuture<Void> follow = OwnThread.run(() -> {
                try {
                    s.jobs().logs(a, j.id, true, followed);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            Path printed = Path.of(home, "printed");
            for (int i = 0; i < 6000 && !Files.exists(printed); i++) { // up to 60 s: a loaded machine
                Thread.sleep(10);
            }
            assertThat(printed).as("the job printed its lines").exists();
            disk.free(); // room again: the note of what was lost can be written, when the file closes
            Files.writeString(Path.of(home, "end"), "");
            NodeService.awaitEnd(j, Duration.ofMinutes(1));
            ByteArrayOutputStream logs = new ByteArrayOutputStream();
            s.jobs().logs(a, j.id, false, logs); // at once: the state turned, the output may not be final yet
            assertThat(logs.toString(StandardCharsets.UTF_8)).as("alice's logs read as her job ended").contains(
                    "bytes of output were not kept: the state directory's disk refused them");
            follow.get(1, TimeUnit.MINUTES);
            assertThat(followed.toString(StandardCharsets.UTF_8)).as("alice's logs followed to the end").contains(
                    "bytes of output were not kept: the state directory's disk refused them");
        }
    }

    /** @return a working directory of the user's own (the test's users have no home) */
    static String home(Path tmp, LocalUsers.User u) throws Exception {
        Path d = Files.createDirectories(tmp.resolve("home-" + u.name()));
        LocalUsers.run(List.of("/bin/chown", u.uid() + ":" + u.gid(), d.toString()), 30);
        return d.toString();
    }

}
