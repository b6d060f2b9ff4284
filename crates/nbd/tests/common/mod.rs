//! Helpers shared by the nbd crate's integration tests that speak the protocol by hand.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Negotiate export `name` by hand (fixed newstyle, `NBD_OPT_GO`), so the test controls
/// every byte sent afterwards.
pub async fn negotiate_go(c: &mut TcpStream, name: &str) {
    let mut greet = [0u8; 18];
    c.read_exact(&mut greet).await.unwrap();
    c.write_all(&3u32.to_be_bytes()).await.unwrap();
    let mut m = b"IHAVEOPT".to_vec();
    m.extend_from_slice(&7u32.to_be_bytes()); // NBD_OPT_GO
    m.extend_from_slice(&(6 + name.len() as u32).to_be_bytes());
    m.extend_from_slice(&(name.len() as u32).to_be_bytes());
    m.extend_from_slice(name.as_bytes());
    m.extend_from_slice(&0u16.to_be_bytes()); // no information requests
    c.write_all(&m).await.unwrap();
    loop {
        let mut h = [0u8; 20];
        c.read_exact(&mut h).await.unwrap();
        let mut d = vec![0; u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize];
        c.read_exact(&mut d).await.unwrap();
        if u32::from_be_bytes(h[12..16].try_into().unwrap()) == 1 {
            return; // NBD_REP_ACK
        }
    }
}
