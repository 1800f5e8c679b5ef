'use strict';
// The login form: posts the credentials as JSON and goes to the console on success.
document.addEventListener('DOMContentLoaded', () => {
  const form = document.getElementById('login-form');
  const error = document.getElementById('login-error');
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    const response = await fetch('/api/login', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        user: document.getElementById('user').value,
        password: document.getElementById('password').value,
      }),
    });
    if (response.ok) {
      window.location.assign('/#/overview');
    } else {
      const body = await response.json().catch(() => ({}));
      error.textContent = body.error || ('login failed: ' + response.status);
    }
  });
});
