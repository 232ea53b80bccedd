package qzfixture;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.Properties;

import org.quartz.utils.ConnectionProvider;

/**
 * A Quartz connection provider over plain {@link DriverManager}, configured with
 * {@code org.quartz.dataSource.ds.connectionProvider.class} and the bean properties {@code url},
 * {@code user} and {@code password}; it avoids depending on a particular c3p0 or HikariCP
 * version. Closed connections are kept for reuse (Quartz opens one per operation, and a new
 * PostgreSQL connection each time would make the fixture slow).
 */
public class DmConnectionProvider implements ConnectionProvider {
    private String url;
    private String user;
    private String password;
    private final ArrayDeque<Connection> idle = new ArrayDeque<>();

    public void setUrl(String url) {
        this.url = url;
    }

    public void setUser(String user) {
        this.user = user;
    }

    public void setPassword(String password) {
        this.password = password;
    }

    @Override
    public Connection getConnection() throws SQLException {
        Connection real;
        synchronized (idle) {
            real = idle.poll();
        }
        if (real == null || real.isClosed()) {
            Properties props = new Properties();
            if (user != null) {
                props.setProperty("user", user);
            }
            if (password != null) {
                props.setProperty("password", password);
            }
            real = DriverManager.getConnection(url, props);
        }
        final Connection target = real;
        final boolean[] closed = {false};
        return (Connection)
                Proxy.newProxyInstance(
                        Connection.class.getClassLoader(),
                        new Class<?>[] {Connection.class},
                        (proxy, method, args) -> {
                            switch (method.getName()) {
                                case "close":
                                    if (!closed[0]) {
                                        closed[0] = true;
                                        if (!target.getAutoCommit()) {
                                            target.rollback();
                                            target.setAutoCommit(true);
                                        }
                                        synchronized (idle) {
                                            idle.push(target);
                                        }
                                    }
                                    return null;
                                case "isClosed":
                                    return closed[0] || target.isClosed();
                                default:
                                    try {
                                        return method.invoke(target, args);
                                    } catch (InvocationTargetException e) {
                                        throw e.getCause();
                                    }
                            }
                        });
    }

    @Override
    public void shutdown() throws SQLException {
        synchronized (idle) {
            for (Connection c : idle) {
                c.close();
            }
            idle.clear();
        }
    }

    @Override
    public void initialize() throws SQLException {
        if (url == null) {
            throw new SQLException("DmConnectionProvider: no url");
        }
        try {
            Class.forName("org.postgresql.Driver");
        } catch (ClassNotFoundException e) {
            throw new SQLException("the PostgreSQL JDBC driver is not on the class path", e);
        }
    }
}
