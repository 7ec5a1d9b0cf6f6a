document.querySelector("h1").addEventListener("click", () => alert("Open 7-19"));
