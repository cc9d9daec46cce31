package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.Result;
import io.gpusched.testing.LocalUsers.User;
import io.gpusched.testing.OwnThread;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node socket as users meet it: {@code curl --unix-socket}, run as root and as real users made with
 * {@code useradd} (switched with {@code setpriv}), against the same routes and JSON as the TCP console. The caller
 * is the kernel's (SO_PEERCRED); nothing a request carries changes it. Needs root and curl (skipped, saying so,
 * without them).
 */
class NodeSocketTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;
    Path state;
    Path socket;
    SimulatedGpuInventory inventory;
    GpuScheduler scheduler;
    ConsoleServer console;
    LocalUsers users;

    @BeforeEach
    void setUp() throws IOException {
        assumeTrue(LocalUsers.available(), "needs root, useradd and setpriv to act as real users");
        assumeTrue(LocalUsers.run(List.of("sh", "-c", "command -v curl"), 10).exit() == 0, "needs curl");
        // users must reach the socket: the test's directory is root's 0700 by default
        Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rwx--x--x"));
        state = Files.createDirectory(tmp.resolve("state"));
        socket = tmp.resolve("run").resolve("gpusched.sock");
        inventory = GpuInventories.simulated("dgx1-v100");
        scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build();
        users = LocalUsers.create();
    }

    @AfterEach
    void tearDown() {
        if (console != null) {
            console.close();
        }
        if (scheduler != null) {
            scheduler.close();
        }
        if (inventory != null) {
            inventory.close();
        }
        if (users != null) {
            users.close();
        }
    }

    ConsoleServer start(UnaryOperator<ConsoleServer.Builder> options) {
        if (console != null) {
            console.close();
        }
        console = options.apply(ConsoleServer.builder().scheduler(scheduler).stateDir(state).ticking(false)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).unixSocket(socket)).build();
        return console.start();
    }

    static List<String> curl(Path socket, String... args) {
        List<String> c = new ArrayList<>(List.of("curl", "-sS", "-m", "30", "-w", "\\n%{http_code}",
                "--unix-socket", socket.toString()));
        c.addAll(List.of(args));
        return c;
    }

    /** @return the JSON body of a curl answer, checking its status */
    static JsonNode body(Result r, int status) throws IOException {
        assertThat(r.exit()).as("curl: %s", r.err()).isZero();
        int nl = r.out().lastIndexOf('\n');
        assertThat(r.out().substring(nl + 1)).as(r.out()).isEqualTo(Integer.toString(status));
        return JSON.readTree(r.out().substring(0, nl));
    }

    @Test
    void whoamiIsTheKernelsPeerForRootAndForARealUser() throws Exception {
        User alice = users.user("alice");
        start(b -> b);
        JsonNode root = body(LocalUsers.run(curl(socket, "http://localhost/api/v1/whoami"), 60), 200);
        assertThat(root.path("uid").asLong()).isZero();
        assertThat(root.path("user").asText()).isEqualTo("root");
        assertThat(root.path("admin").asBoolean()).isTrue();

        JsonNode a = body(LocalUsers.runAs(alice, curl(socket, "http://localhost/api/v1/whoami"), 60), 200);
        assertThat(a.path("uid").asLong()).isEqualTo(alice.uid());
        assertThat(a.path("gid").asLong()).isEqualTo(alice.gid());
        assertThat(a.path("user").asText()).isEqualTo(alice.name());
        assertThat(a.path("groups").toString()).contains(alice.name()); // her own group (useradd -U)
        assertThat(a.path("admin").asBoolean()).isFalse();

        // what a request claims changes nothing: headers, the console token, a body naming root
        JsonNode forged = body(LocalUsers.runAs(alice, curl(socket, "-H", "X-Forwarded-User: root",
                "-H", "X-Remote-User: root", "-H", "Authorization: Bearer " + console.token().value(),
                "-H", "Host: evil.example", "--data-binary", "{\"uid\":0,\"user\":\"root\"}", "-X", "GET",
                "http://localhost/api/v1/whoami?uid=0&user=root"), 60), 200);
        assertThat(forged).isEqualTo(a);
    }

    @Test
    void theSocketServesTheConsolesRoutesAndJson() throws Exception {
        User bob = users.user("bob");
        start(b -> b);
        for (String path : List.of("/api/v1/devices", "/api/v1/topology", "/api/v1/allocations")) {
            JsonNode tcp = JSON.readTree(SlowEventClientsAttackTest.get(console, path).split("\r\n\r\n", 2)[1]);
            JsonNode viaSocket = body(LocalUsers.runAs(bob, curl(socket, "http://localhost" + path), 60), 200);
            assertThat(viaSocket).as(path).isEqualTo(tcp);
        }
        // no Host rule on the socket (no browser reaches it), and none needed: a foreign Host is served
        JsonNode node = body(LocalUsers.runAs(bob, curl(socket, "-H", "Host: evil.example",
                "http://localhost/api/v1/node"), 60), 200);
        assertThat(node.path("gpus").asInt()).isEqualTo(8);
        // an unknown path: the console's JSON 404
        JsonNode missing = body(LocalUsers.runAs(bob, curl(socket, "http://localhost/no/such"), 60), 404);
        assertThat(missing.path("status").asInt()).isEqualTo(404);
    }

    @Test
    void theConsolesOwnChangesOnTheSocketAreForAdminsOnly() throws Exception {
        User bob = users.user("bob");
        start(b -> b);
        String held = scheduler.allocate(GpuRequests.fromCliFlags("--gpu=1", "--owner=alice")).id();
        JsonNode refused = body(LocalUsers.runAs(bob, curl(socket, "-X", "DELETE",
                "http://localhost/api/v1/allocations/" + held), 60), 403);
        assertThat(refused.path("reason").asText()).isEqualTo("FORBIDDEN");
        assertThat(refused.path("error").asText()).contains(bob.name()).contains("admin");
        assertThat(scheduler.allocation(held)).isPresent();
        JsonNode post = body(LocalUsers.runAs(bob, curl(socket, "-H", "Content-Type: application/json",
                "--data-binary", "{\"flags\":[\"--gpu=1\"]}", "http://localhost/api/v1/allocations"), 60), 403);
        assertThat(post.path("reason").asText()).isEqualTo("FORBIDDEN");
        assertThat(scheduler.allocations()).hasSize(1);
        // root is an admin: the same release goes through, without any token
        JsonNode released = body(LocalUsers.run(curl(socket, "-X", "DELETE",
                "http://localhost/api/v1/allocations/" + held), 60), 200);
        assertThat(released.path("released").asBoolean()).isTrue();
    }

    @Test
    void theAdminGroupMakesItsMembersAdmins() throws Exception {
        String admins = users.group("adm");
        User carol = users.user("carol", admins);
        User dave = users.user("dave");
        start(b -> b.adminGroup(admins));
        assertThat(body(LocalUsers.runAs(carol, curl(socket, "http://localhost/api/v1/whoami"), 60), 200)
                .path("admin").asBoolean()).isTrue();
        assertThat(body(LocalUsers.runAs(dave, curl(socket, "http://localhost/api/v1/whoami"), 60), 200)
                .path("admin").asBoolean()).isFalse();
    }

    @Test
    void aHostRouteSeesTheCallerAndTakesPrecedence() throws Exception {
        User erin = users.user("erin");
        start(b -> b.route("/api/v1/echo", ex -> {
            Caller c = Caller.of(ex);
            byte[] body = Exchanges.readBody(ex, 1024);
            Exchanges.json(ex, 200, Map.of("uid", c.uid(), "user", c.user(), "path",
                    ex.getRequestURI().getRawPath(), "body", new String(body, StandardCharsets.UTF_8)));
        }).route("/api/v1/allocations", ex -> Exchanges.json(ex, 200, Map.of("host", true))));
        JsonNode e = body(LocalUsers.runAs(erin, curl(socket, "--data-binary", "{\"uid\":0}",
                "http://localhost/api/v1/echo/sub"), 60), 200);
        assertThat(e.path("uid").asLong()).isEqualTo(erin.uid());
        assertThat(e.path("user").asText()).isEqualTo(erin.name());
        assertThat(e.path("path").asText()).isEqualTo("/api/v1/echo/sub");
        // not a prefix match across a name: /api/v1/echoes is not under /api/v1/echo
        body(LocalUsers.runAs(erin, curl(socket, "http://localhost/api/v1/echoes"), 60), 404);
        // the host's /api/v1/allocations replaces the console's, on the socket and on TCP
        assertThat(body(LocalUsers.runAs(erin, curl(socket, "-X", "DELETE",
                "http://localhost/api/v1/allocations/x"), 60), 200).path("host").asBoolean()).isTrue();
        assertThat(SlowEventClientsAttackTest.get(console, "/api/v1/allocations")).contains("\"host\":true");
    }

    /**
     * A request held open whose host ends it as the console closes (the node service answers its waits 503 when it
     * stops, just before serve closes the console) gets its whole answer: close() lets held requests finish
     * (CLOSE_GRACE) before it closes the connections. The route takes a moment between being let go and answering, as
     * a waiting handler thread does once woken.
     */
    @Test
    void aHeldRequestEndedAsTheConsoleClosesGetsItsWholeAnswer() throws Exception {
        JsonNode got = answeredAsTheConsoleCloses("fay", true, 503, Map.of("reason", "SHUTTING_DOWN"));
        assertThat(got.path("reason").asText()).isEqualTo("SHUTTING_DOWN");
    }

    /**
     * The same for a request that is not held open (an allocation being made, a detached job being started): the
     * close used to wait for held requests only, and cut this one ("Empty reply from server").
     */
    @Test
    void aRequestInProgressAsTheConsoleClosesGetsItsWholeAnswer() throws Exception {
        JsonNode got = answeredAsTheConsoleCloses("gil", false, 201, Map.of("id", "a-1"));
        assertThat(got.path("id").asText()).isEqualTo("a-1");
    }

    /**
     * A real user's request to a route (held open or not) that is let go, and answers a moment later, as the console
     * closes.
     *
     * @return the answer's body, checked to have come whole with {@code status}
     */
    private JsonNode answeredAsTheConsoleCloses(String user, boolean held, int status, Map<String, Object> body)
            throws Exception {
        User u = users.user(user);
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        start(b -> b.route("/api/v1/slow", ex -> {
            if (held) {
                ConsoleServer.keepOpen(ex);
            }
            entered.countDown();
            try {
                letGo.await();
                Thread.sleep(200); // woken, then answering: the window a close must not cut
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Exchanges.json(ex, status, body);
        }));
        CompletableFuture<Result> answer = OwnThread.supply(() -> {
            try {
                return LocalUsers.runAs(u, curl(socket, "http://localhost/api/v1/slow"), 60);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
        assertThat(entered.await(60, TimeUnit.SECONDS)).as("the request is being handled").isTrue();
        letGo.countDown();
        console.close();
        console = null;
        return body(answer.get(90, TimeUnit.SECONDS), status);
    }

    @Test
    void theSocketIs0666OrItsGroupOnly() throws Exception {
        String group = users.group("sock");
        User member = users.user("in", group);
        User outsider = users.user("out");
        start(b -> b.socketGroup(group));
        PosixFileAttributes a = Files.readAttributes(socket, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        assertThat(PosixFilePermissions.toString(a.permissions())).isEqualTo("rw-rw----");
        assertThat(a.group().getName()).isEqualTo(group);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(socket.getParent())))
                .isEqualTo("rwxr-xr-x");
        body(LocalUsers.runAs(member, curl(socket, "http://localhost/api/v1/whoami"), 60), 200);
        Result out = LocalUsers.runAs(outsider, curl(socket, "http://localhost/api/v1/whoami"), 60);
        assertThat(out.exit()).as("an outsider connects: %s", out.out()).isEqualTo(7); // curl: couldn't connect
        console.close();
        console = null;
        assertThat(socket).doesNotExist(); // removed on close
        start(b -> b);
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(socket))).isEqualTo("rw-rw-rw-");
        body(LocalUsers.runAs(outsider, curl(socket, "http://localhost/api/v1/whoami"), 60), 200);
    }

    @Test
    void aStaleSocketIsReplacedAnythingElseIsRefusedNamingIt() throws Exception {
        Files.createDirectories(socket.getParent());
        // a stale socket: bound, then its server gone (the file stays)
        ServerSocketChannel old = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        old.bind(UnixDomainSocketAddress.of(socket));
        old.close();
        assertThat(socket).exists();
        start(b -> b);
        body(LocalUsers.run(curl(socket, "http://localhost/api/v1/whoami"), 60), 200);
        // a live one: refused, the live service keeps it
        ConsoleServer.Builder second = ConsoleServer.builder().scheduler(scheduler).stateDir(state).ticking(false)
                .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).unixSocket(socket);
        ConsoleServer other = second.build();
        assertThatThrownBy(other::start).hasMessageContaining(socket.toString()).hasMessageContaining("in use");
        other.close();
        body(LocalUsers.run(curl(socket, "http://localhost/api/v1/whoami"), 60), 200);
        console.close();
        console = null;
        // a regular file, a link to one, a FIFO: each refused, naming it, and left as it was
        Path target = tmp.resolve("precious");
        Files.writeString(target, "keep me");
        Files.writeString(socket, "a file");
        assertThatThrownBy(() -> start(b -> b)).hasMessageContaining(socket.toString())
                .hasMessageContaining("regular file");
        assertThat(Files.readString(socket)).isEqualTo("a file");
        Files.delete(socket);
        Files.createSymbolicLink(socket, target);
        assertThatThrownBy(() -> start(b -> b)).hasMessageContaining("symbolic link");
        assertThat(Files.readString(target)).isEqualTo("keep me");
        assertThat(Files.isSymbolicLink(socket)).isTrue();
        Files.delete(socket);
        assertThat(LocalUsers.run(List.of("mkfifo", socket.toString()), 10).exit()).isZero();
        assertThatThrownBy(() -> start(b -> b)).hasMessageContaining("FIFO");
        Files.delete(socket);
        // a directory others can write is refused before anything is bound in it
        Files.setPosixFilePermissions(socket.getParent(), PosixFilePermissions.fromString("rwxrwxrwx"));
        assertThatThrownBy(() -> start(b -> b)).hasMessageContaining("writable by others");
        assertThat(socket).doesNotExist();
        try (var left = Files.list(socket.getParent())) {
            assertThat(left.toList()).as("nothing left in the socket directory").isEmpty();
        }
    }
}
