package io.gpusched.cli.adversarial.review14;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.cli.Selftest;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributes;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Review14: the selftest's {@code service} check, on failure, tells the user "the socket's group (gpusched) must
 * include you" whatever the socket's group is (Selftest.java, service(): a literal). The package's own
 * /etc/gpusched/gpusched.yaml leaves socket_group empty (every local user may connect: no group to join) and gives
 * gpu-users as the example; admin_group, not the socket's group, is gpusched. A user following the remedy joins a
 * group that does not let them reach the socket.
 */
@Tag("adversarial")
@Timeout(60)
class SelftestServiceRemedyTest {
    @TempDir
    Path dir;

    @Test
    void aFailedServiceCheckNamesTheSocketsOwnGroup() throws Exception {
        Path socket = dir.resolve("service.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(socket));
            Thread acceptor = new Thread(() -> {
                try {
                    while (true) {
                        try (SocketChannel c = server.accept()) {
                            // a service that ends every connection at once: the check fails
                        }
                    }
                } catch (Exception ended) {
                    // the server was closed
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            GroupPrincipal group = Files.readAttributes(socket, PosixFileAttributes.class).group();
            Selftest.Check c = Selftest.service(socket);
            assertThat(c.verdict()).as(c.toString()).isEqualTo(Selftest.Verdict.FAIL);
            assertThat(c.remedy()).as("the remedy for a socket of group " + group.getName())
                    .contains(group.getName()).doesNotContain("(gpusched)");
        }
    }
}
