package io.gpusched.kubernetes.internal;

import io.gpusched.core.BackendUnavailableException;
import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Executor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * gRPC over Unix domain sockets with grpc-netty-shaded's epoll transport: event loops, servers and channels. Internal:
 * the device plug-in and its tests share it. Closing a server deletes its socket file (Netty does), so a server on a
 * path must be shut down before another serves the same path.
 */
public final class UnixSockets implements AutoCloseable {
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;

    /**
     * @param name prefix of the event-loop thread names
     * @throws BackendUnavailableException when epoll is not available here (not Linux, or the native library failed)
     */
    public UnixSockets(String name) {
        ensureAvailable();
        this.boss = new EpollEventLoopGroup(1, daemon(name + "-accept"));
        this.workers = new EpollEventLoopGroup(2, daemon(name + "-io"));
    }

    /** @throws BackendUnavailableException naming why epoll Unix sockets cannot be used here */
    public static void ensureAvailable() {
        if (!Epoll.isAvailable()) {
            throw new BackendUnavailableException("gRPC over Unix domain sockets needs grpc-netty-shaded's epoll"
                    + " transport, which is unavailable here: " + Epoll.unavailabilityCause());
        }
    }

    /** @return whether epoll Unix sockets work here */
    public static boolean available() {
        return Epoll.isAvailable();
    }

    /** @return why not, when {@link #available()} is false */
    public static Throwable unavailabilityCause() {
        return Epoll.unavailabilityCause();
    }

    /**
     * Serves services on a socket path (removing a stale file first).
     *
     * @throws IOException when the socket cannot be bound
     */
    public Server serve(Path socket, Executor executor, BindableService... services) throws IOException {
        Files.deleteIfExists(socket);
        NettyServerBuilder b = NettyServerBuilder.forAddress(new DomainSocketAddress(socket.toString()))
                .channelType(EpollServerDomainSocketChannel.class).bossEventLoopGroup(boss)
                .workerEventLoopGroup(workers).executor(executor);
        for (BindableService s : services) {
            b.addService(s);
        }
        return b.build().start();
    }

    /** @return a plaintext channel to a socket path */
    public ManagedChannel channel(Path socket) {
        return NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toString()))
                .channelType(EpollDomainSocketChannel.class).eventLoopGroup(workers).usePlaintext().build();
    }

    /** Shuts a channel down and waits up to a second. */
    public static void close(ManagedChannel channel) {
        channel.shutdownNow();
        try {
            channel.awaitTermination(1, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** @return a daemon thread factory naming threads {@code name-N} */
    public static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    @Override
    public void close() {
        boss.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(3, TimeUnit.SECONDS);
        workers.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(3, TimeUnit.SECONDS);
    }
}
