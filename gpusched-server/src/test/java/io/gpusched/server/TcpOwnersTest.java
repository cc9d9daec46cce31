package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link TcpOwners} against proc trees written as the kernel writes {@code /proc/net/tcp} and {@code tcp6}: a
 * connection's client is the uid of the client's line, a burst is served by one read, and a line of a connection the
 * server had already accepted is never used for a later connection that got the same client port (a stale line made
 * root's request count as another user's).
 */
class TcpOwnersTest {
    static final int SERVER_PORT = 0x1F90;

    @TempDir
    Path proc;
    final List<String> tcp = new ArrayList<>();
    final List<String> tcp6 = new ArrayList<>();
    InetAddress loopback;

    @BeforeEach
    void setUp() throws IOException {
        Files.createDirectories(proc.resolve("net"));
        loopback = InetAddress.getByName("127.0.0.1");
        write();
    }

    void write() throws IOException {
        String header =
                "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
        List<String> four = new ArrayList<>(List.of(header));
        four.add(line(0, v4(SERVER_PORT), "00000000:0000", "0A", 0, 1000));
        four.addAll(tcp);
        List<String> six = new ArrayList<>(List.of(header));
        six.addAll(tcp6);
        Files.write(proc.resolve("net/tcp"), four);
        Files.write(proc.resolve("net/tcp6"), six);
    }

    static String line(int sl, String local, String remote, String state, long uid, long inode) {
        return String.format("%4d: %s %s %s 00000000:00000000 00:00000000 00000000 %5d        0 %d 1 0000000000000000"
                + " 100 0 0 10 0", sl, local, remote, state, uid, inode);
    }

    static String v4(int port) {
        return TcpOwners.hex(new byte[]{127, 0, 0, 1}) + ":" + String.format("%04X", port);
    }

    static String mapped(int port) {
        byte[] m = new byte[16];
        m[10] = (byte) 0xff;
        m[11] = (byte) 0xff;
        m[12] = 127;
        m[15] = 1;
        return TcpOwners.hex(m) + ":" + String.format("%04X", port);
    }

    /** The client's socket and the server's end of one connection; inode 0: not accepted by the server yet. */
    void connection(int clientPort, long uid, long serverInode) {
        tcp.add(line(tcp.size() + 1, v4(clientPort), v4(SERVER_PORT), "01", uid, 7000 + clientPort));
        tcp.add(line(tcp.size() + 1, v4(SERVER_PORT), v4(clientPort), "01", 0, serverInode));
    }

    OptionalLong owner(TcpOwners owners, int clientPort) {
        return owners.owner(new InetSocketAddress(loopback, clientPort), new InetSocketAddress(loopback, SERVER_PORT));
    }

    @Test
    void theClientsLineNamesItsUid() throws IOException {
        connection(0xA000, 1001, 555);
        write();
        assertThat(owner(new TcpOwners(proc), 0xA000)).hasValue(1001);
    }

    @Test
    void aLineOfAConnectionAcceptedEarlierIsNotUsedForALaterOneOnTheSamePort() throws IOException {
        TcpOwners owners = new TcpOwners(proc);
        // alice's first connection, accepted and held open, is listed when her second one is looked up
        connection(0xB000, 1001, 556);
        connection(0xA000, 1001, 557);
        write();
        assertThat(owner(owners, 0xA000)).hasValue(1001);
        // her first connection closes; root's next connection gets the same client port
        tcp.clear();
        connection(0xB000, 0, 600);
        write();
        assertThat(owner(owners, 0xB000)).as("root's connection on alice's old port").hasValue(0);
    }

    @Test
    void oneReadServesABurstTheKernelHadAlreadyEstablished() throws IOException {
        TcpOwners owners = new TcpOwners(proc);
        connection(0xC001, 1002, 700); // accepted: the one looked up
        connection(0xC002, 1002, 0); // established, waiting in the accept queue
        tcp.add(line(9, v4(0xC003), v4(SERVER_PORT), "01", 1003, 7003));
        tcp6.add(line(1, mapped(SERVER_PORT), mapped(0xC003), "08", 0, 0)); // closed by its client, not accepted
        write();
        assertThat(owner(owners, 0xC001)).hasValue(1002);
        // no read after the first: the files now say nothing
        tcp.clear();
        tcp6.clear();
        write();
        assertThat(owner(owners, 0xC002)).hasValue(1002);
        assertThat(owner(owners, 0xC003)).hasValue(1003);
        assertThat(owner(owners, 0xC002)).as("each line is used once").isEmpty();
    }

    @Test
    void anIpv4ClientOfAnIpv6ServerSocketIsFoundInEitherFile() throws IOException {
        tcp.add(line(1, v4(0xD000), v4(SERVER_PORT), "01", 1004, 8000));
        tcp6.add(line(1, mapped(SERVER_PORT), mapped(0xD000), "01", 0, 801));
        tcp6.add(line(2, mapped(0xD001), mapped(SERVER_PORT), "01", 1005, 8001));
        tcp6.add(line(3, mapped(SERVER_PORT), mapped(0xD001), "01", 0, 802));
        write();
        TcpOwners owners = new TcpOwners(proc);
        assertThat(owner(owners, 0xD000)).hasValue(1004);
        assertThat(owner(owners, 0xD001)).hasValue(1005);
    }

    @Test
    void garbledLinesAndAbsentFilesAreNoOwner() throws IOException {
        Files.write(proc.resolve("net/tcp"), List.of("header", "  1: zz:zz qq 01 x x x x notauid 0 0", "", "   "));
        Files.delete(proc.resolve("net/tcp6"));
        assertThat(owner(new TcpOwners(proc), 0xE000)).isEmpty();
        assertThat(owner(new TcpOwners(proc.resolve("absent")), 0xE000)).isEmpty();
    }
}
